"""The token positions of a particle run as a component: none without a mask, ``s_i`` with.

The particle simulation holds one of two components and calls it at the same places whatever
the run, as the PDE simulation does its positions (:mod:`meanfield.positions`):
:class:`NoTokenPositions` for a run without a mask (tokens drawn from the initial density,
moving with the layer's field) and :class:`CausalTokenPositions` for a causal run (token i at
``s_i = (i + 1/2) / n``, drawn from the density of its position, moving with the masked field
of :class:`~.causal.CausalTokenField`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..causal import slice_positions
from ..initial import InitialDensity
from ..mesh import RawMesh
from ..model import VelocityField
from ..nonlocal_field.base import NonlocalEvaluator
from ..velocity import LayerVelocity
from .causal import CausalTokenField, PositionalDecay
from .sampling import sample_initial, sample_tokens


class TokenPositions(Protocol):
    """What the particle simulation asks of its token positions."""

    @property
    def s(self) -> np.ndarray | None:
        """(n,) the tokens' positions, ``None`` without a mask."""

    @property
    def velocity(self) -> VelocityField:
        """The tokens' velocity in a run of attention."""

    def sample(self, density: InitialDensity, n: int, rng: np.random.Generator, sampler: str,
               mesh: RawMesh | None) -> np.ndarray:
        """(n, d) the initial tokens, all n (every rank draws them all)."""

    def describe(self, field: str) -> str:
        """The field on the log's description of the run."""

    def facts(self, evaluator: NonlocalEvaluator | None, n: int) -> dict[str, Any]:
        """Solver facts of the mask for metadata.json."""


class NoTokenPositions:
    """The component of a run without a mask: the tokens move with ``field``."""

    s: np.ndarray | None = None

    def __init__(self, field: VelocityField) -> None:
        self.velocity = field

    def sample(self, density: InitialDensity, n: int, rng: np.random.Generator, sampler: str,
               mesh: RawMesh | None) -> np.ndarray:
        return sample_initial(density, n, rng, sampler, mesh)

    def describe(self, field: str) -> str:
        return field

    def facts(self, evaluator: NonlocalEvaluator | None, n: int) -> dict[str, Any]:
        return {}


class CausalTokenPositions:
    """The component of a causal run: token i at ``s_i = (i + 1/2) / n``.

    Parameters
    ----------
    field
        The layer velocity of the run (:class:`~.causal.CausalTokenField`).
    comm
        MPI communicator of the tokens.
    n
        The number of tokens.
    decay
        The positional decay and normalisation.
    """

    def __init__(self, field: LayerVelocity, comm, n: int, decay: PositionalDecay) -> None:
        self.field = CausalTokenField(field, comm, decay=decay)
        self.velocity: VelocityField = self.field
        self.s: np.ndarray = slice_positions(n)

    def sample(self, density: InitialDensity, n: int, rng: np.random.Generator, sampler: str,
               mesh: RawMesh | None) -> np.ndarray:
        return sample_tokens(density, self.s, rng, sampler, mesh)

    def describe(self, field: str) -> str:
        return f"causal {field}"

    def facts(self, evaluator: NonlocalEvaluator | None, n: int) -> dict[str, Any]:
        """The masked field's route for the active layer (none for a layer without attention)."""
        if evaluator is None:
            return {}
        route = "fast" if self.field.route(evaluator, n) is not None else "direct"
        return {"causal_field": {"route": route, "block": self.field.block}}

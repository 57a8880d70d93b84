"""The token positions of a particle run as a component: the tokens' side of a mask.

The particle simulation (and a batch of prompts, :mod:`meanfield.particles.prompts`) holds one
component and calls it at the same places whatever the run, as the PDE simulation does its
positions (:mod:`meanfield.positions`).  Each mask kind (:mod:`meanfield.masks`) has its
component, registered under the mask's name (:func:`tokens_component`) and built by
:func:`token_component`: :class:`NoTokenPositions` for a run without a mask (tokens drawn from
the initial density, moving with the layer's field) and :class:`CausalTokenPositions` for a
causal run (token i at ``s_i = (i + 1/2) / n``, drawn from the density of its position, moving
with the masked field of :class:`~meanfield.masks.causal_tokens.CausalTokenField`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import numpy as np

from ..initial import InitialDensity
from ..masks import Causal, Mask
from ..masks.causal_tokens import CausalTokenField, PositionalDecay
from ..mesh import RawMesh
from ..model import VelocityField
from ..nonlocal_field.base import NonlocalEvaluator
from ..velocity import LayerVelocity
from .sampling import sample_initial, sample_tokens


class TokenPositions(Protocol):
    """What the particle simulation asks of its token positions."""

    @property
    def s(self) -> np.ndarray | None:
        """(n,) the tokens' positions, ``None`` without a mask."""

    def moving(self, field: LayerVelocity, comm) -> VelocityField:
        """The tokens' velocity in a run of attention with the layer velocity ``field`` (one
        measure's) on the tokens' communicator."""

    def sample(self, density: InitialDensity, n: int, rng: np.random.Generator, sampler: str,
               mesh: RawMesh | None) -> np.ndarray:
        """(n, d) the initial tokens, all n (every rank draws them all)."""

    def describe(self, field: str) -> str:
        """The field on the log's description of the run."""

    def facts(self, evaluator: NonlocalEvaluator | None, n: int) -> dict[str, Any]:
        """Solver facts of the mask for metadata.json."""


#: The token components by mask name (:func:`tokens_component`).
_COMPONENTS: dict[str, Callable[[Mask, int], TokenPositions]] = {}
_Component = TypeVar("_Component", bound=type)


def tokens_component(mask: str) -> Callable[[_Component], _Component]:
    """Registers the decorated class as the tokens' component of the mask called ``mask``: it is
    built as ``cls(mask, n)`` (the run's :class:`~meanfield.masks.Mask`, the number of tokens)."""

    def register(cls: _Component) -> _Component:
        _COMPONENTS[mask] = cls
        return cls

    return register


def token_component(mask: Mask, n: int) -> TokenPositions:
    """The tokens' component of ``mask`` for ``n`` tokens."""
    return _COMPONENTS[mask.name](mask, n)


@tokens_component("none")
class NoTokenPositions:
    """The component of a run without a mask: the tokens move with the layer's field."""

    s: np.ndarray | None = None

    def __init__(self, mask: Mask, n: int) -> None:
        pass

    def moving(self, field: LayerVelocity, comm) -> VelocityField:
        return field

    def sample(self, density: InitialDensity, n: int, rng: np.random.Generator, sampler: str,
               mesh: RawMesh | None) -> np.ndarray:
        return sample_initial(density, n, rng, sampler, mesh)

    def describe(self, field: str) -> str:
        return field

    def facts(self, evaluator: NonlocalEvaluator | None, n: int) -> dict[str, Any]:
        return {}


@tokens_component("causal")
class CausalTokenPositions:
    """The component of a causal run: token i at ``s_i = (i + 1/2) / n``.

    Parameters
    ----------
    mask
        The run's mask (:class:`~meanfield.masks.Causal`: the positional decay and normalisation).
    n
        The number of tokens.
    """

    #: The masked field (:meth:`moving`).
    field: CausalTokenField

    def __init__(self, mask: Causal, n: int) -> None:
        self.decay = PositionalDecay(mask.decay, mask.normalise)
        self.s: np.ndarray = mask.token_positions(n)

    def moving(self, field: LayerVelocity, comm) -> VelocityField:
        """The layer velocity ``field`` masked: the causal token field (module docstring)."""
        self.field = CausalTokenField(field, comm, decay=self.decay)
        return self.field

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

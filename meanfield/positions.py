"""The token positions as a component of the PDE simulation: the PDE side of a mask.

The PDE simulation holds one component and calls it at the same places whatever the run, as it
does its atoms (:mod:`meanfield.atoms.component`).  Each mask kind (:mod:`meanfield.masks`)
has its component, registered under the mask's name (:func:`pde_component`) and built by
:func:`positions_component`: :class:`NoPositions` for a run without a mask (the state is one
density, stepped by the spatial scheme) and :class:`CausalPositions` for a causal run
(``model.mask = "causal"``: the state stacks the densities of M position slices, stepped by a
:class:`~meanfield.masks.causal_slices.CausalScheme`, whose slices move with the prefix sums of
the causal mask's velocity).  A component builds the spatial scheme with the velocity it moves
with, so nothing is rewired afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import numpy as np

from .discretisation.base import SpatialScheme
from .initial import InitialDensity
from .masks import Causal, Mask
from .masks.causal_slices import CausalScheme, CausalVelocity
from .model import VelocityField
from .timestepping import SteppedScheme

#: Builds the spatial scheme of one slice from the velocity it moves with.
SchemeBuilder = Callable[[VelocityField], SpatialScheme]
#: Gathers (num_owned, ...) rows of this rank into (C, ...) rows in global cell order on rank 0
#: (``None`` elsewhere; collective).
Gather = Callable[[np.ndarray], np.ndarray | None]


class PositionsComponent(Protocol):
    """What the PDE simulation asks of its token positions (:class:`NoPositions` or
    :class:`CausalPositions`)."""

    @property
    def scheme(self) -> SpatialScheme:
        """The spatial scheme of one slice."""

    @property
    def stepping(self) -> SteppedScheme:
        """What the time stepper steps (without atoms)."""

    @property
    def count(self) -> int:
        """The number M of slices (1 without a mask)."""

    @property
    def s(self) -> np.ndarray | None:
        """(M,) the slices' positions ``s_k = (k + 1/2) / M``, ``None`` without a mask."""

    def initial_state(self, density: InitialDensity) -> np.ndarray:
        """The initial state of the initial density (each slice of mass 1)."""

    def split(self, state: np.ndarray) -> list[np.ndarray]:
        """The M states of one slice each (of the scheme) in a state."""

    def whole(self, state: np.ndarray) -> np.ndarray:
        """The scheme's state of the whole token distribution (mass 1)."""

    def kernel(self) -> np.ndarray:
        """(M, M) the slices' weights W: slice k moves with the field of ``sum_j W[k, j] mu_j``
        (``[[1]]`` without a mask)."""

    def arrays(self, state: np.ndarray, gather: Gather) -> dict[str, np.ndarray | None]:
        """``density`` and, DG1, ``vertex_density`` of a snapshot, gathered (collective)."""

    def by_position(self, state: np.ndarray,
                    observe: Callable[[np.ndarray], dict[str, float]]) -> dict[str, np.ndarray]:
        """``observe`` of each slice: name -> (M,) values (collective); empty without a mask."""

    def static_arrays(self) -> dict[str, np.ndarray]:
        """Arrays written once per run (the slices' positions)."""

    def describe(self) -> str:
        """The mask on the log's description of the run (empty without a mask)."""


#: The PDE components by mask name (:func:`pde_component`).
_COMPONENTS: dict[str, Callable[[Mask, VelocityField, SchemeBuilder], PositionsComponent]] = {}
_Component = TypeVar("_Component", bound=type)


def pde_component(mask: str) -> Callable[[_Component], _Component]:
    """Registers the decorated class as the PDE component of the mask called ``mask``: it is
    built as ``cls(mask, velocity, build)`` (the run's :class:`~meanfield.masks.Mask`)."""

    def register(cls: _Component) -> _Component:
        _COMPONENTS[mask] = cls
        return cls

    return register


def positions_component(mask: Mask, velocity: VelocityField, build: SchemeBuilder) -> PositionsComponent:
    """The PDE component of ``mask``, moving with ``velocity``, its scheme built by ``build``."""
    return _COMPONENTS[mask.name](mask, velocity, build)


@pde_component("none")
class NoPositions:
    """The component of a run without a mask: one density, stepped by the scheme.

    Parameters
    ----------
    mask
        The run's mask (:class:`~meanfield.masks.NoMask`).
    velocity
        The velocity the density moves with.
    build
        Builds the spatial scheme from it.
    """

    count = 1
    s: np.ndarray | None = None

    def __init__(self, mask: Mask, velocity: VelocityField, build: SchemeBuilder) -> None:
        self.scheme = build(velocity)
        self.stepping: SteppedScheme = self.scheme

    def initial_state(self, density: InitialDensity) -> np.ndarray:
        return self.scheme.initial_state(density)

    def split(self, state: np.ndarray) -> list[np.ndarray]:
        return [state]

    def whole(self, state: np.ndarray) -> np.ndarray:
        return state

    def kernel(self) -> np.ndarray:
        return np.ones((1, 1))

    def arrays(self, state: np.ndarray, gather: Gather) -> dict[str, np.ndarray | None]:
        arrays = {"density": gather(self.scheme.cell_averages(state))}
        vertex = self.scheme.vertex_density(state)
        if vertex is not None:
            arrays["vertex_density"] = gather(vertex)
        return arrays

    def by_position(self, state: np.ndarray,
                    observe: Callable[[np.ndarray], dict[str, float]]) -> dict[str, np.ndarray]:
        return {}

    def static_arrays(self) -> dict[str, np.ndarray]:
        return {}

    def describe(self) -> str:
        return ""


@pde_component("causal")
class CausalPositions:
    """The component of a causal run: M position slices.

    Parameters
    ----------
    mask
        The run's mask (:class:`~meanfield.masks.Causal`): the slices and their weights
        (:class:`~meanfield.masks.causal_slices.CausalVelocity`).
    field
        The velocity of the active layer (attention and feed-forward block) of one measure.
    build
        Builds the spatial scheme of one slice from the slices' velocity.
    """

    def __init__(self, mask: Causal, field: VelocityField, build: SchemeBuilder) -> None:
        self.mask = mask
        self.velocity = CausalVelocity(field, mask.slice_count, mask.decay, mask.normalise)
        self.slice_scheme = CausalScheme(build(self.velocity), self.velocity)
        self.scheme = self.slice_scheme.scheme
        self.stepping: SteppedScheme = self.slice_scheme
        self.count = mask.slice_count
        self.s: np.ndarray = self.slice_scheme.positions

    def initial_state(self, density: InitialDensity) -> np.ndarray:
        return self.slice_scheme.initial_state(density.at)

    def split(self, state: np.ndarray) -> list[np.ndarray]:
        return self.slice_scheme.split(state)

    def whole(self, state: np.ndarray) -> np.ndarray:
        return self.slice_scheme.whole(state)

    def kernel(self) -> np.ndarray:
        return self.velocity.kernel()

    def arrays(self, state: np.ndarray, gather: Gather) -> dict[str, np.ndarray | None]:
        """``density`` (M, C) and, DG1, ``vertex_density`` (M, C, nv): one row per slice."""

        def slices(values: np.ndarray) -> np.ndarray | None:  # (M, num_owned, ...) -> (M, C, ...)
            rows = gather(np.ascontiguousarray(np.moveaxis(values, 0, 1)))
            return None if rows is None else np.ascontiguousarray(np.moveaxis(rows, 1, 0))

        arrays = {"density": slices(self.slice_scheme.cell_averages(state))}
        vertices = self.slice_scheme.vertex_density(state)
        if vertices is not None:
            arrays["vertex_density"] = slices(vertices)
        return arrays

    def by_position(self, state: np.ndarray,
                    observe: Callable[[np.ndarray], dict[str, float]]) -> dict[str, np.ndarray]:
        rows = [observe(part) for part in self.split(state)]
        return {name: np.array([row[name] for row in rows]) for name in rows[0]}

    def static_arrays(self) -> dict[str, np.ndarray]:
        return {"positions": self.s}

    def describe(self) -> str:
        return self.mask.describe()

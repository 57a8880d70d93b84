"""Attention masks: which tokens a token attends to, registered by name (``model.mask``).

The package of the mask kinds.  This module is the registry with the kinds the package ships
(:class:`NoMask`, :class:`Causal`): pure numpy, importing nothing of the package but the one
position formula (:mod:`meanfield.sequence`), so the config, the PDE, the tokens and the
run-directory format all take it.  The causal kind's numerics are its modules beside it,
imported by its components only: the PDE's position slices and their prefix sums
(:mod:`.causal_slices`) and the tokens' masked field (:mod:`.causal_tokens`).

A mask kind is one class that registers itself under its config name when it is
defined (as the attention kinds of :mod:`meanfield.attention` do): :func:`mask_names` lists
the registered names (the config schema's choices) and :func:`make_mask` builds the mask of a
run from its name and its ``[positions]`` settings.  A mask owns what differs between the
masks wherever a run is built, written or read back:

- its config keys: the defaults it fills in ``[positions]`` and what it refuses
  (:meth:`Mask.resolve`, :meth:`Mask.refusal`);
- its positions: the PDE's slices (:attr:`Mask.slices`, :meth:`Mask.slice_positions`) and the
  tokens' positions (:meth:`Mask.token_positions`), and whether an initial density may depend
  on the position (:attr:`Mask.positional`);
- its token kernel for the batched tokens (:meth:`Mask.token_arrays`: the logits' bias and the
  rows' scale);
- its words: the log's description, the summary of ``meanfield check``, the run's facts in
  metadata.json, the heading of the density pictures;
- its run files' slice axes (:attr:`Mask.slice_shape`, :meth:`Mask.slice_arrays`; netCDF's
  ``position`` dimension, :mod:`meanfield.rundir.netcdf`);
- its read-back: a PDE run as the plain run of the whole token distribution or of each slice
  (:meth:`Mask.whole_run`, :meth:`Mask.slice_runs`, :func:`whole_measure`).

What needs a mesh, an evaluator or matplotlib registers under the mask's name on the floors
above: the PDE's component (:func:`meanfield.positions.pde_component`), the tokens'
(:func:`meanfield.particles.positions.tokens_component`) and the pictures of the slices
(:func:`meanfield.plotting.run_plots.slice_pictures`, optional).  "Adding a variant" in the
docs says what a new mask touches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..sequence import slice_positions

if TYPE_CHECKING:
    from ..attention import Attention

#: Position slices of a causal run without ``positions.slices``.
DEFAULT_SLICES = 32

#: The registered mask kinds by config name, in the order they were defined.
_KINDS: dict[str, type[Mask]] = {}


def mask_names() -> tuple[str, ...]:
    """The names of the registered masks (the choices of ``model.mask``)."""
    return tuple(_KINDS)


def mask_kind(name: str) -> type[Mask]:
    """The registered mask class called ``name`` (``KeyError`` for an unknown name)."""
    return _KINDS[name]


def make_mask(name: str = "none", positions: Mapping[str, Any] | None = None) -> Mask:
    """The mask ``name`` with the resolved ``[positions]`` settings of a run (absent: none);
    ``ValueError`` for a name no mask is registered under."""
    if name not in _KINDS:
        raise ValueError(f"model.mask: {name!r} is not a registered mask (registered: {', '.join(_KINDS)}; "
                         "import the module that defines it)")
    return _KINDS[name].from_settings(positions or {})


def mask_of(config: Mapping[str, Any]) -> Mask:
    """The mask of a run's resolved config as a nested dict (config.toml read back; a config
    without ``model.mask``: no mask)."""
    return make_mask(config.get("model", {}).get("mask", "none"), config.get("positions"))


def whole_measure(result: Any) -> Any:
    """A PDE run read back as the plain run of its whole token distribution (its mask's
    :meth:`Mask.whole_run`); a result without a mask (particles) as it is."""
    mask: Mask = getattr(result, "mask", NO_MASK)
    return mask.whole_run(result)


class Mask(ABC):
    """A mask kind; a subclass with a ``name`` registers itself (see the module docstring)."""

    #: The config name (``model.mask``); a class without one is not registered.
    name: ClassVar[str] = ""
    #: Whether a density may depend on the token position ``s`` (``initial.expression``).
    positional: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            _KINDS[cls.name] = cls

    @classmethod
    @abstractmethod
    def from_settings(cls, positions: Mapping[str, Any]) -> Mask:
        """The mask of a run's resolved ``[positions]`` settings."""

    @classmethod
    def resolve(cls, positions: dict[str, Any]) -> None:
        """Fill in place the defaults of a config's ``[positions]`` settings (none: nothing)."""
        return None

    @classmethod
    def refusal(cls, data: Mapping[str, Any], attention: Sequence[Attention]) -> str | None:
        """What the mask refuses in a config's validated keys ``data`` whose layers name the
        ``attention`` kinds: ``field: why``, or ``None``."""
        return None

    @property
    @abstractmethod
    def slices(self) -> int | None:
        """The number M of the PDE's position slices; ``None``: one density, no positions."""

    @property
    def count(self) -> int:
        """The number of densities the PDE's state holds (M, or 1 without slices)."""
        return self.slices or 1

    @abstractmethod
    def slice_positions(self) -> np.ndarray | None:
        """(M,) the PDE slices' positions; ``None`` without positions."""

    @abstractmethod
    def token_positions(self, n: int) -> np.ndarray | None:
        """(n,) the positions of ``n`` tokens; ``None`` without positions."""

    @abstractmethod
    def token_arrays(self, n: int, normalised: bool) -> dict[str, np.ndarray]:
        """The batched tokens' arrays of ``n`` tokens for an attention kind (``normalised``:
        softmax): ``bias`` (n, n) added to the logits (``-inf``: a masked pair; absent: none)
        and, unnormalised, ``scale`` (n, 1), the factor of each row."""

    def describe(self) -> str:
        """The mask on the log's description of a PDE run (empty: nothing to say)."""
        return ""

    def summary(self) -> list[str]:
        """The lines of ``meanfield check``'s summary on the mask (none: nothing to say)."""
        return []

    def facts(self) -> dict[str, Any]:
        """The mask in a run's metadata.json."""
        return {"mask": self.name, "slices": self.slices}

    def heading(self, title: str) -> str:
        """The title of a run's density pictures (which show the whole token distribution)."""
        return title

    @property
    @abstractmethod
    def slice_shape(self) -> tuple[int, ...]:
        """The slice axes of a PDE run file's per-output arrays: ``()`` or ``(M,)``."""

    @abstractmethod
    def slice_arrays(self, name: str) -> list[tuple[str, tuple[int, ...]]]:
        """The arrays of one per-output quantity ``name`` in a format of one array per density
        (XDMF): each array's name and its index in the slice axes."""

    def slice_columns(self, times: np.ndarray) -> dict[str, np.ndarray]:
        """The columns ``output``, ``t`` and ``position`` of a table of the slices' values at
        ``times``, one row per output and slice (none without slices)."""
        return {}

    def whole_density(self, density: np.ndarray) -> np.ndarray:
        """The whole token distribution's density of one output read back: (M, C) slices'
        densities -> (C,); a density without slices as it is."""
        return density

    def info(self, run_type: str) -> list[str]:
        """The lines of ``meanfield info`` on the mask of a ``run_type`` run."""
        return []

    def whole_run(self, result: Any) -> Any:
        """A PDE run read back (:class:`~meanfield.rundir.results.RunResult`) as the plain run
        of the whole token distribution (a run without slices: as it is)."""
        return result

    def slice_runs(self, result: Any) -> list[Any]:
        """A PDE run read back as the plain runs of its slices, in position order (``ValueError``
        for a mask without slices)."""
        raise ValueError(f"{getattr(result, 'path', 'run')}: not a causal run (model.mask = {self.name!r}): "
                         "no positions")


@dataclass(frozen=True)
class NoMask(Mask):
    """No mask: every token attends to every token; one density, no positions."""

    name: ClassVar[str] = "none"

    @classmethod
    def from_settings(cls, positions: Mapping[str, Any]) -> NoMask:
        return cls()

    @classmethod
    def refusal(cls, data: Mapping[str, Any], attention: Sequence[Attention]) -> str | None:
        """``[positions]`` only with a mask that has positions."""
        for key, value in data["positions"].items():
            if value is not None:
                return f"positions.{key}: needs model.mask = 'causal' (a run without a mask has no positions)"
        return None

    @property
    def slices(self) -> int | None:
        return None

    def slice_positions(self) -> np.ndarray | None:
        return None

    def token_positions(self, n: int) -> np.ndarray | None:
        return None

    def token_arrays(self, n: int, normalised: bool) -> dict[str, np.ndarray]:
        return {} if normalised else {"scale": np.full((n, 1), 1.0 / n)}

    @property
    def slice_shape(self) -> tuple[int, ...]:
        return ()

    def slice_arrays(self, name: str) -> list[tuple[str, tuple[int, ...]]]:
        return [(name, ())]


#: The mask of a run without one.
NO_MASK = NoMask()


@dataclass(frozen=True)
class Causal(Mask):
    """The causal (decoder) mask: the token at position s attends to the positions s' <= s.

    The PDE keeps M position slices at ``s_k = (k + 1/2) / M`` (:mod:`.causal_slices`), the
    tokens sit at ``s_i = (i + 1/2) / n``; ``decay`` adds ``-decay (s - s')`` to the logits
    and ``normalise`` divides an unnormalised row by its positional mass.
    """

    name: ClassVar[str] = "causal"
    positional: ClassVar[bool] = True

    slice_count: int
    decay: float = 0.0
    normalise: bool = False

    @classmethod
    def from_settings(cls, positions: Mapping[str, Any]) -> Causal:
        return cls(int(positions["slices"]), float(positions.get("decay") or 0.0), bool(positions.get("normalise")))

    @classmethod
    def resolve(cls, positions: dict[str, Any]) -> None:
        for key, default in (("slices", DEFAULT_SLICES), ("decay", 0.0), ("normalise", False)):
            if positions[key] is None:
                positions[key] = default

    @classmethod
    def refusal(cls, data: Mapping[str, Any], attention: Sequence[Attention]) -> str | None:
        """A causal run only of attention without atoms; ``positions.normalise`` only for kinds
        that do not normalise."""
        if data["positions"]["normalise"] and any(kind.normalised for kind in attention):
            return ("positions.normalise: needs model.attention = 'unnormalized' (softmax attention is already "
                    "normalised over positions)")
        if data["model"]["velocity"] != "attention":
            return "model.mask: 'causal' needs model.velocity = 'attention'"
        for key in ("capture", "initial"):
            if data["atoms"][key]:
                return (f"atoms.{key}: atoms are not supported with model.mask = 'causal' (set "
                        f"atoms.{key} = {'false' if key == 'capture' else '[]'} or model.mask = 'none')")
        return None

    @property
    def slices(self) -> int:
        return self.slice_count

    def slice_positions(self) -> np.ndarray:
        return slice_positions(self.slice_count)

    def token_positions(self, n: int) -> np.ndarray:
        return slice_positions(n)

    def token_arrays(self, n: int, normalised: bool) -> dict[str, np.ndarray]:
        s = slice_positions(n)
        gap = s[:, None] - s[None, :]
        bias = np.where(gap >= 0, -self.decay * gap, -np.inf)
        if normalised:
            return {"bias": bias}
        scale = np.full((n, 1), 1.0 / n)
        if self.normalise:
            scale = scale / np.exp(bias).sum(axis=1, keepdims=True) * n
        return {"bias": bias, "scale": scale}

    def describe(self) -> str:
        text = f", causal mask, {self.slice_count} position slices"
        if self.decay > 0:
            text += f", positional decay {self.decay:g}"
        if self.normalise:
            text += ", normalised over positions"
        return text

    def summary(self) -> list[str]:
        M = self.slice_count
        return [f"mask:        causal, M = {M} position slices at s_k = (k + 1/2)/M (a density per slice; "
                f"their {M} fields in one batched evaluation a stage)"]

    def heading(self, title: str) -> str:
        return f"{title}\nthe mean over the {self.slice_count} token positions"

    @property
    def slice_shape(self) -> tuple[int, ...]:
        return (self.slice_count,)

    def slice_arrays(self, name: str) -> list[tuple[str, tuple[int, ...]]]:
        return [(f"{name}_s{s:.4f}", (j,)) for j, s in enumerate(self.slice_positions())]

    def slice_columns(self, times: np.ndarray) -> dict[str, np.ndarray]:
        T, M = len(times), self.slice_count
        return {"output": np.repeat(np.arange(T), M), "t": np.repeat(times, M),
                "position": np.tile(self.slice_positions(), T)}

    def whole_density(self, density: np.ndarray) -> np.ndarray:
        return density.mean(axis=0)

    def info(self, run_type: str) -> list[str]:
        if run_type == "particles":
            return ["mask:       causal, token i at s_i = (i + 1/2)/n attends to the tokens j <= i"]
        return [f"mask:       causal, M = {self.slice_count} position slices (a density per slice)"]

    def whole_run(self, result: Any) -> Any:
        """The mean of the slices' densities (each a probability density, so the mean has mass 1;
        the run's observables are already the whole distribution's)."""
        return self._plain(result, result.densities.mean(axis=1),
                           None if result.vertex_densities is None else result.vertex_densities.mean(axis=1))

    def slice_runs(self, result: Any) -> list[Any]:
        vertex = result.vertex_densities
        return [self._plain(result, result.densities[:, k], None if vertex is None else vertex[:, k])
                for k in range(self.slice_count)]

    @staticmethod
    def _plain(result: Any, densities: np.ndarray, vertex_densities: np.ndarray | None) -> Any:
        return replace(result, densities=densities, vertex_densities=vertex_densities, positions=None,
                       observables_by_position={}, mask=NO_MASK)

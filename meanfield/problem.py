"""The resolved problem: what a validated config asks for, as typed objects, built once per run.

A run's driver builds the :class:`Problem` where the run starts and hands it to everything
downstream (the simulation, the run's start, its writers, the check's report, a resume), so
each setting is interpreted in exactly one place: the output times, the particle dimension,
the user observables, the layer schedule and the initial density are built here, and what only
building them can check (the layers' keys and shapes, the kernel concentration, the initial
density's parameters, a ``[model.random]`` law and its weights file, the observables'
expressions) is checked as they are built.  Building a Problem is cheap (no mesh, no files
written) and raises :class:`~meanfield.config.ConfigError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .atoms.capture import CaptureRule
from .choices import SPHERES
from .config import KAPPA_MAX, Config, ConfigError, check_schedule_end
from .discretisation.registry import scheme_class
from .expression import ExpressionError
from .initial import InitialDensity, InitialDensityError, make_initial_density
from .layers import LayerSchedule
from .masks import Mask, make_mask
from .memory import cells_of
from .mesh import RawMesh, raw_mesh
from .model import AttentionModel, ModelError, VelocityField, rotation_velocity
from .own_observables import OwnObservables
from .random_weights import DrawnWeights, RandomLayers
from .spheres import sphere_named


def output_times(time: Mapping[str, Any]) -> np.ndarray:
    """Sorted output times of a validated ``[time]`` section, always including 0 and t_final:
    ``outputs`` equal intervals or the listed times, or every ``outputs_every`` from 0."""
    out, every, t_final = time["outputs"], time.get("outputs_every"), time["t_final"]
    if every is not None:
        times = every * np.arange(math.floor(t_final / every * (1 + 1e-12)) + 1)
        times = times[times < t_final * (1 - 1e-12)]  # t_final itself is added below, not a step short of it
    else:
        times = np.linspace(0.0, t_final, out + 1) if isinstance(out, int) else np.asarray(out, float)
    return np.unique(np.concatenate([[0.0], times, [time["t_final"]]]))


@dataclass(frozen=True)
class MeshSpec:
    """The ``[mesh]`` section: a generated mesh (sphere, resolution) or a mesh file."""

    sphere: str
    resolution: int | None
    file: str | None

    @property
    def d(self) -> int:
        """Ambient dimension (2 for S^1, 3 for S^2)."""
        return SPHERES[self.sphere]

    @property
    def level(self) -> int | None:
        """The icosphere's refinement level of a generated S^2 mesh (``mesh.resolution``); else ``None``."""
        if self.file is not None or self.resolution is None:
            return None
        return sphere_named(self.sphere).level(self.resolution)

    @property
    def cells(self) -> int | None:
        """Cells of a generated mesh, counted without building it (S^1: ``mesh.resolution``; S^2:
        20 * 4**level); ``None`` for a mesh file."""
        if self.file is not None or self.resolution is None:
            return None
        return cells_of(self.sphere, self.resolution)

    def build(self) -> RawMesh:
        """The serial mesh (generated, or read and checked); call it on one rank."""
        return raw_mesh(self.sphere, self.resolution, self.file)


@dataclass(frozen=True)
class VelocitySpec:
    """Attention dynamics, or a prescribed solid-body rotation (transport checks).

    ``choice``: ``model.velocity`` (``"attention"`` or ``"rotation"``).
    """

    choice: str
    rotation_rate: float
    rotation_axis: tuple[float, ...]

    @property
    def is_attention(self) -> bool:
        return self.choice == "attention"

    def rotation(self, d: int) -> VelocityField:
        """The prescribed rotation field in dimension ``d`` (2 or 3)."""
        return rotation_velocity(self.rotation_rate, list(self.rotation_axis), d)


@dataclass(frozen=True)
class TimeSpec:
    """The ``[time]`` section with the output times resolved (sorted, always with 0 and t_final)."""

    t_final: float
    output_times: np.ndarray = field(repr=False)
    cfl: float
    dt: float | None
    dt_max: float | None
    tol: float
    wall_limit: float | None


@dataclass(frozen=True)
class SchemeSpec:
    """The ``[scheme]`` section."""

    kind: str
    limiter: bool

    @property
    def order(self) -> int:
        """Formal spatial order of the scheme (1 for FV, 2 for DG1)."""
        return scheme_class(self.kind).order


@dataclass(frozen=True)
class FieldSpec:
    """The ``[nonlocal]`` section: how the attention field is evaluated."""

    method: str
    tol: float
    threads: int | None
    direct_sums: bool = False


@dataclass(frozen=True)
class ParticleSpec:
    """The ``[particles]`` section (``n`` may still be given on the command line)."""

    n: int | None
    seed: int
    d: int
    dt: float | None
    sampler: str
    integrator: str = "rk4"
    prompts: int = 1
    device: str = "cpu"
    precision: str = "float64"

    @property
    def batched(self) -> bool:
        """Whether the run moves through the batched engine (:mod:`meanfield.particles.batch`): more
        than one prompt, a GPU or float32."""
        return self.prompts != 1 or self.device != "cpu" or self.precision != "float64"


@dataclass(frozen=True)
class OutputSpec:
    """The ``[output]`` section."""

    directory: Path
    paraview: bool
    checkpoint_every: float
    log_every: float | str | None
    own_observables: OwnObservables
    diagnostics: bool = True


@dataclass(frozen=True)
class AtomSpec:
    """The ``[atoms]`` section (see :mod:`meanfield.atoms`).

    Attributes
    ----------
    capture
        Move collapsed clusters into atoms.
    rule
        The capture criteria (:class:`~meanfield.atoms.capture.CaptureRule`).
    merge_distance
        Atoms closer than this angle (radians) merge.
    absorb_mass
        Density mass at or below which the density goes to the atoms (0: never).
    lipschitz_step
        Atoms step at most ``cfl * lipschitz_step / L`` (:mod:`meanfield.atoms.coupling`).
    initial
        (k, 1 + d) initial atoms: mass, then the point (normalised later).
    """

    capture: bool
    rule: CaptureRule
    merge_distance: float
    absorb_mass: float
    lipschitz_step: float
    initial: np.ndarray = field(repr=False)

    @property
    def enabled(self) -> bool:
        """A hybrid run: capture on, or atoms from the start."""
        return self.capture or len(self.initial) > 0


class Problem:
    """A validated config resolved into typed parts (see the module docstring).

    Parameters
    ----------
    config
        A validated :class:`~meanfield.config.Config`.

    Attributes
    ----------
    mask
        The attention mask (:mod:`meanfield.masks`: :class:`~meanfield.masks.NoMask`, every token
        attends to every token, or :class:`~meanfield.masks.Causal`, a decoder, with its position
        slices, decay and normalisation).

    The initial density of position s at points is ``problem.initial(d).at(points, s)``.
    """

    def __init__(self, config: Config) -> None:
        data = config.data
        self.config = config
        self.name: str = data["name"]
        m, t, p, o = data["model"], data["time"], data["particles"], data["output"]
        self.mesh = MeshSpec(data["mesh"]["sphere"], data["mesh"]["resolution"], data["mesh"]["file"])
        self.velocity = VelocitySpec(m["velocity"], float(m["rotation_rate"]), tuple(map(float, m["rotation_axis"])))
        self.time = TimeSpec(float(t["t_final"]), output_times(t), float(t["cfl"]), t["dt"], t["dt_max"],
                             float(t["tol"]), t["wall_limit"])
        self.scheme = SchemeSpec(data["scheme"]["kind"], bool(data["scheme"]["limiter"]))
        nl = data["nonlocal"]
        self.field = FieldSpec(nl["method"], float(nl["tol"]), nl["threads"], bool(nl["direct_sums"]))
        self.particles = ParticleSpec(p["n"], int(p["seed"]), p["d"] or self.mesh.d, p["dt"], p["sampler"],
                                      p["integrator"], p["prompts"], p["device"], p["precision"])
        a = data["atoms"]
        self.atoms = AtomSpec(bool(a["capture"]), CaptureRule(float(a["core_level"]), int(a["core_cells"]),
                                                             float(a["min_height"]), float(a["core_fraction"])),
                              float(a["merge_distance"]), float(a["absorb_mass"]), float(a["lipschitz_step"]),
                              np.array(a["initial"], dtype=float).reshape(len(a["initial"]), 1 + self.mesh.d))
        self.mask: Mask = make_mask(m["mask"], data["positions"])
        try:
            observables = OwnObservables.from_config(o["observables"], self.time.output_times)
        except ExpressionError as exc:
            raise ConfigError(str(exc)) from None
        self.output = OutputSpec(Path(o["dir"] or Path("runs") / self.name), bool(o["xdmf"]),
                                 float(o["checkpoint_every"]), o["log_every"], observables, bool(o["diagnostics"]))
        #: The law of a ``[model.random]`` schedule, ``None`` for weights written out in the config.
        self.random: RandomLayers | None = None
        self._drawn: DrawnWeights | None = None
        self._schedules: dict[int, LayerSchedule] = {}
        self._initials: dict[int, InitialDensity] = {}
        self._build_model(self.particles.d)

    def _build_model(self, d: int) -> None:
        """Build the model's law or layers and the initial density in the particle dimension ``d``
        (the PDE's, unless ``particles.d`` says otherwise), checking them as they are built: a
        ``[model.random]`` law and its weights file, each layer's kernel concentration
        ``beta ||Q^T K||_2`` (at most :data:`~meanfield.config.KAPPA_MAX`), the schedule's end."""
        data = self.config.data
        m = data["model"]
        try:
            if m["random"] is not None:
                self.random = RandomLayers.build(m["random"])
                if self.random.weights is not None:  # a weights file that does not fit the law is refused now
                    self._drawn = DrawnWeights.read(self.random.weights, self.random, d)
            else:
                self._schedules[d] = LayerSchedule.build(d, m)
            self._initials[d] = make_initial_density(data["initial"], d, causal=self.mask.positional)
        except (ModelError, InitialDensityError) as exc:
            raise ConfigError(str(exc)) from None
        if self.random is None:
            schedule = self._schedules[d]
            for layer, origin in zip(schedule.layers, schedule.origins):
                model = layer.attention
                kappa = 0.0 if model is None else max(model.beta * float(np.linalg.norm(h.interaction, 2))
                                                      for h in model.heads)
                if not kappa <= KAPPA_MAX:
                    raise ConfigError(f"{origin}.beta: beta * ||Q^T K||_2 = {kappa:.3g} exceeds {KAPPA_MAX:g}: the "
                                      "attention kernel is a Dirac mass in double precision")
        check_schedule_end(data)

    @property
    def sphere(self) -> str:
        return self.mesh.sphere

    @property
    def d(self) -> int:
        """The mesh's ambient dimension."""
        return self.mesh.d

    def schedule(self, d: int | None = None) -> LayerSchedule:
        """The layer schedule (attention and feed-forward block per layer) in dimension ``d``
        (default: the mesh's); built once per d."""
        d = d or self.d
        if d not in self._schedules:
            model = self.config.data["model"]
            drawn = self.random_weights()
            if drawn is None:
                self._schedules[d] = LayerSchedule.build(d, model)
            elif drawn.d != d:
                raise ConfigError(f"model.random: the weights are drawn in d = {drawn.d} (particles.d, else the "
                                  f"mesh's), this run needs d = {d}")
            else:
                assert self.random is not None
                self._schedules[d] = drawn.schedule(self.random, float(model["beta"]), model["attention"])
        return self._schedules[d]

    def random_weights(self) -> DrawnWeights | None:
        """The weights of a ``[model.random]`` schedule (``None`` without one), in the particle
        dimension (``particles.d``, else the mesh's): read from ``model.random.weights`` when the
        problem was built, else drawn on first use; built once."""
        if self.random is not None and self._drawn is None:
            self._drawn = self.random.draw(self.particles.d)
        return self._drawn

    def initial(self, d: int | None = None) -> InitialDensity:
        """The initial density in dimension ``d`` (default: the mesh's); built once per d.  In a
        causal run its :meth:`~meanfield.initial.InitialDensity.at` (points, s) -> values gives
        the density of position s."""
        d = d or self.d
        if d not in self._initials:
            self._initials[d] = make_initial_density(self.config.data["initial"], d, causal=self.mask.positional)
        return self._initials[d]

    def model(self, d: int | None = None) -> AttentionModel:
        """The attention model in force at t = 0, in dimension ``d`` (default: the mesh's).

        Raises :class:`~meanfield.config.ConfigError` when the first layer has no attention
        (``attention = "none"``).
        """
        model = self.schedule(d).layers[0].attention
        if model is None:
            raise ConfigError("model.attention: 'none' at t = 0: there is no attention model")
        return model



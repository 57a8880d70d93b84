"""Run configuration: TOML files, defaults, ``--set`` overrides and validation.

A config is a nested mapping with the sections of :data:`SCHEMA`.  :func:`load_config`
merges a file (or mapping) over the defaults, applies overrides, rejects unknown keys and
checks every value, raising one :class:`ConfigError` that names the field.  Nothing here is
expensive, so a bad config is refused before any mesh is built or file written.  The
resolved problem (model, initial density, output times, ...) is built from a config by
:class:`meanfield.problem.Problem`.

Bounds that protect a run from input that would never finish or never fit are checked here
too: at most :data:`MAX_OUTPUTS` output times, a fixed step giving at most :data:`MAX_STEPS`
steps, and a kernel concentration ``beta ||Q^T K||_2`` of at most :data:`KAPPA_MAX`.
"""

from __future__ import annotations

import copy
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .discretisation.registry import SCHEMES
from .expression import ExpressionError
from .initial import InitialDensityError, make_initial_density
from .layers import ATTENTION_SETTINGS, LayerSchedule
from .mesh import SPHERES
from .model import ModelError, did_you_mean
from .nonlocal_field.select import DEFAULT_TOL, METHODS
from .random_weights import DrawnWeights, RandomLayers
from .timestepping import DEFAULT_TOL as DEFAULT_STEP_TOL
from .trackers import Trackers


class ConfigError(ValueError):
    """A config that cannot run; the message names the offending field."""


#: Most output times a run may ask for (each one is a file and a row).
MAX_OUTPUTS = 100_000
#: Output intervals of a run that sets neither ``time.outputs`` nor ``time.outputs_every``.
DEFAULT_OUTPUTS = 20
#: The two ways of setting the output times, of which a config gives at most one.
OUTPUT_KEYS = ("outputs", "outputs_every")
#: Most time steps a fixed step (``time.dt``, ``particles.dt``) may imply.
MAX_STEPS = 100_000_000
#: Largest kernel concentration ``beta ||Q_h^T K_h||_2`` (beyond it the kernel is a Dirac in
#: double precision and no evaluator is meaningful).
KAPPA_MAX = 1.0e4
#: A run name: letters, digits, '.', '_', '-', starting with a letter or digit.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: ``[model] mask`` values: every token attends to every token, or to the positions up to its own.
MASKS: tuple[str, ...] = ("none", "causal")
#: Position slices of a causal run without ``positions.slices``.
DEFAULT_SLICES = 32
#: Names of the particle samplers (``meanfield.particles.sampling.SAMPLERS`` must agree).
SAMPLER_NAMES: tuple[str, ...] = ("auto", "exact", "rejection", "mesh", "quantile", "fibonacci")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _positive(v: Any) -> bool:
    return _is_number(v) and v > 0


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _one_of(*choices: str) -> Callable[[Any], bool]:
    return lambda v: v in choices


def _anything(v: Any) -> bool:
    return True


def _plain_name(v: Any) -> bool:
    return isinstance(v, str) and NAME_PATTERN.fullmatch(v) is not None


def _log_every(v: Any) -> bool:
    """A number of seconds > 0, or ``"N steps"`` with N a positive integer."""
    return _positive(v) or (isinstance(v, str) and re.fullmatch(r"\s*[1-9][0-9]*\s+steps?\s*", v) is not None)


def _axis(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and all(map(_is_number, v)) and any(x != 0 for x in v)


def _atom_list(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(a, list) and len(a) >= 3 and all(map(_is_number, a)) and a[0] > 0 and any(x != 0 for x in a[1:])
        for a in v)


def _outputs(v: Any) -> bool:
    if _positive_int(v):
        return v <= MAX_OUTPUTS
    return isinstance(v, list) and 0 < len(v) <= MAX_OUTPUTS and all(map(_is_number, v))


# section -> key -> (default, check, what the value must be)
SCHEMA: dict[str, dict[str, tuple[Any, Callable[[Any], bool], str]]] = {
    "": {"name": (None, _optional(_plain_name), "a plain name (letters, digits, '.', '_', '-'; no path "
                                                "separators; default: the config file's name)")},
    "mesh": {
        "sphere": ("S2", _one_of(*SPHERES), f"one of {sorted(SPHERES)}"),
        "resolution": (None, _optional(lambda v: _positive_int(v) or v == 0),
                       "an integer >= 0 (S1: cells, S2: refinement level)"),
        "file": (None, _optional(lambda v: isinstance(v, str) and v != ""), "a path to a mesh file meshio reads"),
    },
    "model": {
        "velocity": ("attention", _one_of("attention", "rotation"), "'attention' or 'rotation'"),
        "attention": ("softmax", _one_of(*ATTENTION_SETTINGS),
                      "'softmax', 'unnormalized' or 'none' (the feed-forward block alone)"),
        "beta": (4.0, _positive, "a number > 0"),
        "Q": (None, _anything, "a d x d matrix"),
        "K": (None, _anything, "a d x d matrix"),
        "V": (None, _anything, "a d x d matrix"),
        "heads": (None, _optional(lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(h, dict) for h in v)),
                  "a non-empty list of tables with Q, K, V, weight"),
        "ffn": (None, _optional(lambda v: isinstance(v, dict)), "a table with W, A, b, activation ([model.ffn])"),
        "layers": (None, _optional(lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(x, dict)
                                                                                        for x in v)),
                   "a non-empty list of tables with t_end and the model keys that change ([[model.layers]])"),
        "random": (None, _optional(lambda v: isinstance(v, dict)),
                   "a table with layers, eta, heads, qk_std, v_std, seed, ffn_width, ffn_activation, weights "
                   "([model.random]: weights drawn at random for every layer and head)"),
        "rotation_rate": (1.0, _is_number, "a number (angular velocity of the prescribed rotation)"),
        "rotation_axis": ([0.0, 0.0, 1.0], _axis, "a non-zero 3-vector"),
        "mask": ("none", _one_of(*MASKS), "'none' (every token attends to every token) or 'causal' (a decoder: "
                                         "the token at position s attends to the positions up to s)"),
    },
    "positions": {
        "slices": (None, _optional(_positive_int),
                   f"an integer >= 1 (the number M of position slices of a causal run; default "
                   f"{DEFAULT_SLICES} with model.mask = 'causal')"),
        "decay": (None, _optional(lambda v: _is_number(v) and v >= 0),
                  "a number >= 0 (positional decay lambda of a causal run: -lambda (s - s') added to the logits; "
                  "default 0)"),
        "normalise": (None, _optional(lambda v: isinstance(v, bool)),
                      "true or false (a causal unnormalized run: divide each position's field by its positional "
                      "mass; default false)"),
    },
    "initial": {"kind": ("vmf", _anything, "an initial-density kind")},  # parameters checked by initial.py
    "time": {
        "t_final": (10.0, _positive, "a number > 0"),
        "cfl": (0.5, lambda v: _positive(v) and v <= 1, "a number in (0, 1]"),
        "outputs": (None, _optional(_outputs), f"a positive count or a non-empty list of times (at most {MAX_OUTPUTS}; "
                                               f"default {DEFAULT_OUTPUTS} unless time.outputs_every is given)"),
        "outputs_every": (None, _optional(_positive), "a model-time interval > 0 between outputs (instead of "
                                                      "time.outputs)"),
        "dt": (None, _optional(_positive), "a fixed time step > 0 (default: adaptive)"),
        "dt_max": (None, _optional(_positive), "an upper bound > 0 of the adaptive time step"),
        "tol": (DEFAULT_STEP_TOL, lambda v: _positive(v) and v < 1,
                "a number in (0, 1): the adaptive step's error tolerance, relative to the change of a step"),
        "wall_limit": (None, _optional(_positive),
                       "seconds > 0 after which the run checkpoints and stops (status 'interrupted')"),
    },
    "scheme": {
        "kind": ("fv", _one_of(*SCHEMES), " or ".join(f"'{k}' ({c.description})" for k, c in SCHEMES.items())),
        "limiter": (True, lambda v: isinstance(v, bool), "true or false (dg1: Zhang-Shu positivity limiter)"),
    },
    "nonlocal": {
        "method": ("auto", _one_of(*METHODS), f"one of {METHODS}"),
        "tol": (DEFAULT_TOL, lambda v: _positive(v) and v < 1, "a number in (0, 1)"),
        "threads": (None, _optional(_positive_int),
                    "threads per MPI rank, a positive integer (default: MEANFIELD_NUM_THREADS or 1)"),
        "direct_sums": (False, lambda v: isinstance(v, bool),
                        "true or false: the fast field sums exactly over a rank's few mesh points where that is "
                        "cheaper than a NUFFT (many ranks); rank counts then agree to the NUFFT's accuracy "
                        "(below tol / 10), not round-off"),
    },
    "particles": {
        "n": (None, _optional(_positive_int), "a positive integer (number of tokens)"),
        "seed": (0, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
        "d": (None, _optional(lambda v: _positive_int(v) and v >= 2),
              "an integer >= 2 (tokens on S^{d-1}; default: the mesh's d)"),
        "integrator": ("rk4", _one_of("rk4", "ssprk3", "residual"),
                       "'rk4', 'ssprk3' (the PDE's stepper, renormalised after every stage) or 'residual' (with "
                       "[model.random]: one step x <- normalise(x + eta X(x)) per layer, a transformer's discrete "
                       "residual update)"),
        "dt": (None, _optional(_positive), "a time step > 0 (default: 0.25 / Lipschitz bound of the field)"),
        "sampler": ("auto", _one_of(*SAMPLER_NAMES), f"one of {SAMPLER_NAMES}"),
    },
    "atoms": {
        "capture": (False, lambda v: isinstance(v, bool),
                    "true or false (move collapsed clusters' core mass into atoms, see meanfield.atoms)"),
        "core_level": (0.05, lambda v: _positive(v) and v < 1,
                       "a number in (0, 1) (a basin's core: its cells above core_level times its peak)"),
        "core_cells": (None, _optional(_positive_int),
                       "a positive integer (most cells of a core that is captured; default: a core as wide as "
                       "7 cells of the level-4 icosphere on S2 (a vertex star; 28 on level 5), 3 of 1024 cells on "
                       "S1, and never fewer than 7 / 3)"),
        "min_height": (20.0, _positive, "a number > 0 (least peak density of a capture, in units of the "
                                        "mean density)"),
        "core_fraction": (0.9, lambda v: _positive(v) and v <= 1,
                          "a number in (0, 1] (least share of its basin's mass a captured core holds)"),
        "merge_distance": (1e-3, lambda v: _is_number(v) and v >= 0,
                           "an angle >= 0 in radians (atoms closer than this merge)"),
        "absorb_mass": (1e-6, lambda v: _is_number(v) and 0 <= v < 1,
                        "a number in [0, 1) (when the density's mass is at most this, it all goes to the "
                        "atoms and the run continues with atoms alone, free of the density's CFL step; "
                        "0: never)"),
        "lipschitz_step": (1.0, _positive, "a number > 0 (atoms step at most cfl * lipschitz_step / L, L the "
                                           "field's Lipschitz bound; SSP-RK3 is stable up to 2.5)"),
        "initial": ([], _atom_list, "a list of [mass, x_1, ..., x_d] lists (initial atoms: mass > 0, a "
                                    "non-zero point, normalised onto the sphere)"),
    },
    "output": {
        "dir": (None, _optional(lambda v: isinstance(v, str) and v != ""), "a directory path (default runs/<name>)"),
        "xdmf": (True, lambda v: isinstance(v, bool),
                 "true or false (ParaView files density.xdmf over run.nc)"),
        "checkpoint_every": (600.0, _positive, "seconds of wall time > 0 between checkpoints (besides every output)"),
        "log_every": (None, _optional(_log_every),
                      "seconds of wall time > 0 between progress lines in the log, or \"N steps\" (default: at every "
                      "tenth of the model time and every 60 s between)"),
        "observables": ([], lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
                        "a list of tables with name, expression and optionally every ([[output.observables]]: "
                        "observables of one's own, e.g. expression = 'integral(rho * z)', written as columns of "
                        "observables.csv and variables of run.nc; PDE runs)"),
    },
}

#: Default initial densities, per sphere, when a config has no ``[initial]`` table: three
#: von Mises-Fisher bumps that merge into one cluster.
DEFAULT_INITIAL: dict[str, dict[str, Any]] = {
    "S2": {"kind": "vmf", "centers": [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, -0.2]],
           "kappas": [2.0, 2.0, 2.0], "weights": [1.0, 1.0, 1.0]},
    "S1": {"kind": "vmf", "centers": [[1.0, 0.0], [-0.5, 0.8], [-0.6, -0.8]],
           "kappas": [4.0, 4.0, 4.0], "weights": [1.0, 1.0, 1.0]},
}
# The embedded default run (`meanfield run` without a file; `make demo`): clustering of a
# three-bump density on the icosphere of level 4 under softmax attention.
DEFAULT_CONFIG: dict[str, Any] = {
    "name": "s2-clustering",
    "mesh": {"sphere": "S2", "resolution": 4},
    "model": {"attention": "softmax", "beta": 4.0},
    "initial": DEFAULT_INITIAL["S2"],
    "time": {"t_final": 6.0, "cfl": 0.5, "outputs": 12},
}
#: Name of runs from a mapping without ``name``.
DEFAULT_NAME = "run"


@dataclass
class Config:
    """A validated, fully resolved run configuration: the data, and its TOML.

    What the configuration asks for, as typed objects, is :class:`meanfield.Problem`'s to say.

    Attributes
    ----------
    data
        The nested mapping (every key present, ``None`` where unset), as written to the run
        directory.
    source
        Where it came from (a path, or ``"<default>"`` / ``"<dict>"``).
    """

    data: dict
    source: str = "<dict>"

    def to_toml(self) -> str:
        """The config as TOML (:mod:`meanfield.toml_text`: arrays on one line, inline tables);
        unset keys (no value, their defaults apply) are listed in a comment."""
        from .toml_text import config_toml

        unset = [f"{s}.{k}" if s else k for s, k in _flat_none(self.data)]
        head = f"# meanfield run config (resolved from {self.source})\n"
        if unset:
            head += "# unset (defaults apply): " + ", ".join(unset) + "\n"
        sections = {k: v for k, v in _drop_none(self.data).items() if v != {}}  # [positions] of a run without mask
        return config_toml(sections, head)


def mesh_dimension(data: Mapping) -> int:
    """Ambient dimension of the mesh of validated config data (2 for S^1, 3 for S^2)."""
    return SPHERES[data["mesh"]["sphere"]]


def particle_dimension(data: Mapping) -> int:
    """Ambient dimension of the particle system of validated config data: ``particles.d``, else the mesh's."""
    return data["particles"]["d"] or mesh_dimension(data)


def _flat_none(data: dict) -> list[tuple[str, str]]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += [(key, k) for k, v in value.items() if v is None]
        elif value is None:
            out.append(("", key))
    return out


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``section.key=value``; the value is read as a TOML value, else as a string."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    path, raw = text.split("=", 1)
    keys = [k.strip() for k in path.strip().split(".")]
    if not all(keys):
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return keys, value


def _merge(base: dict, update: Mapping) -> None:
    """Merge ``update`` into the defaults; an ``[initial]`` table that names a ``kind``
    replaces the default one, one without ``kind`` updates the default's parameters."""
    for key, value in update.items():
        if key == "initial" and isinstance(value, Mapping):
            base[key] = copy.deepcopy(dict(value)) if "kind" in value else {**base[key], **copy.deepcopy(dict(value))}
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            for k, v in value.items():
                base[key][k] = copy.deepcopy(v)
        else:
            base[key] = copy.deepcopy(value)


def _apply_overrides(data: dict, overrides: list[str]) -> None:
    """Apply ``--set`` overrides; one that switches ``initial.kind`` drops the previous kind's
    parameters, whatever the order of the overrides."""
    parsed = [parse_override(text) for text in overrides]
    kinds = [value for keys, value in parsed if keys == ["initial", "kind"]]
    if kinds and kinds[-1] != data["initial"].get("kind"):
        data["initial"] = {"kind": kinds[-1]}
    set_here = {keys[1] for keys, _ in parsed if len(keys) == 2 and keys[0] == "time" and keys[1] in OUTPUT_KEYS}
    if len(set_here) == 1 and isinstance(data.get("time"), dict):  # one way of setting the outputs replaces the other
        data["time"][next(key for key in OUTPUT_KEYS if key not in set_here)] = None
    for keys, value in parsed:
        table = data
        for i, k in enumerate(keys[:-1]):
            if i > 0 and k in table and table[k] is None:
                table[k] = {}  # an unset table key (model.ffn): --set model.ffn.W=... starts the table
            if not isinstance(table.get(k), dict):
                known = [s for s in SCHEMA if s] if i == 0 else list(table)
                raise ConfigError(f"{'.'.join(keys)}: unknown section {k!r}{did_you_mean(k, known)}")
            table = table[k]
        table[keys[-1]] = value


def _belongs(key: str, here: str | None) -> str:
    """``; `key` belongs in [section]`` when another section of the schema has this key, else ``""``."""
    homes = [s or "the top level" for s, keys in SCHEMA.items() if s != here and key in keys]
    return f"; `{key}` belongs in " + " or ".join(h if h == "the top level" else f"[{h}]" for h in homes) \
        if homes else ""


def _check(data: dict) -> None:
    sections = [k for k in SCHEMA if k]
    for key in data:
        if key not in SCHEMA[""] and key not in SCHEMA:
            hint = _belongs(key, "") or f"{did_you_mean(key, sections + list(SCHEMA['']))}; sections are {sections}"
            raise ConfigError(f"{key}: unknown key or section{hint}")
    for section, keys in SCHEMA.items():
        table = data if section == "" else data.get(section)
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: must be a table")
        for key in list(table) if section and section != "initial" else []:
            if key not in keys:
                hint = _belongs(key, section) or f"{did_you_mean(key, list(keys))}; allowed: {sorted(keys)}"
                raise ConfigError(f"{section}.{key}: unknown key{hint}")
        for key, (_, check, what) in keys.items():
            if key in table and not check(table[key]):
                name = f"{section}.{key}" if section else key
                raise ConfigError(f"{name}: must be {what}, got {table[key]!r}")


def _as_floats(data: dict) -> None:
    """Integers given for keys whose default is a float become floats (``beta = 4`` is 4.0), so
    a config and every table made of configs (``meanfield collect``) keep the key's type."""
    for section, keys in SCHEMA.items():
        table = data if section == "" else data[section]
        for key, (default, _, _) in keys.items():
            value = table.get(key)
            if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
                table[key] = float(value)


#: The default capture core (``atoms.core_cells``) is this many cells of the reference mesh of
#: each sphere (S^2: a vertex star of the level-4 icosphere, about 0.07 rad across; S^1: three
#: of 1024 cells), so that a core is captured at the same width on any mesh.
CORE_CELLS = {"S2": (7, 4 ** 4 * 20), "S1": (3, 1024)}


def default_core_cells(sphere: str, resolution: int | None) -> int:
    """The default ``atoms.core_cells``: the reference core of :data:`CORE_CELLS` in cells of this
    mesh (an icosphere of level ``resolution``, a circle of ``resolution`` cells), never fewer
    than the reference's count; for a mesh file (``resolution`` None) that count itself."""
    cells, reference = CORE_CELLS[sphere]
    if resolution is None:
        return cells
    count = 20 * 4**resolution if sphere == "S2" else resolution
    return max(cells, round(cells * count / reference))


def _resolve(data: dict, base_dir: Path | None, default_name: str) -> None:
    if data["name"] is None:
        data["name"] = default_name
    mesh = data["mesh"]
    if mesh["file"] is None and mesh["resolution"] is None:
        mesh["resolution"] = 4 if mesh["sphere"] == "S2" else 256
    if data["model"]["mask"] == "causal":
        for key, default in (("slices", DEFAULT_SLICES), ("decay", 0.0), ("normalise", False)):
            if data["positions"][key] is None:
                data["positions"][key] = default
    if data["atoms"]["core_cells"] is None:
        data["atoms"]["core_cells"] = default_core_cells(mesh["sphere"], mesh["resolution"] if mesh["file"] is None
                                                         else None)
    if mesh["file"] is not None:
        path = Path(mesh["file"])
        if not path.is_absolute() and base_dir is not None and not path.exists():
            path = base_dir / path
        if not path.is_file():
            raise ConfigError(f"mesh.file: no such file: {mesh['file']}")
        mesh["file"] = str(path)
    random = data["model"]["random"]
    if isinstance(random, dict) and isinstance(random.get("weights"), str) and random["weights"]:
        path = Path(random["weights"])
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise ConfigError(f"model.random.weights: no such file: {random['weights']}")
        random["weights"] = str(path)
    time = data["time"]
    if time["outputs"] is not None and time["outputs_every"] is not None:
        raise ConfigError("time.outputs_every: give time.outputs (a count or a list of times) or time.outputs_every "
                          "(an interval), not both")
    if time["outputs_every"] is not None and time["t_final"] / time["outputs_every"] > MAX_OUTPUTS:
        raise ConfigError(f"time.outputs_every: {time['outputs_every']:g} would make "
                          f"{time['t_final'] / time['outputs_every']:.3g} outputs to t_final = {time['t_final']:g} "
                          f"(at most {MAX_OUTPUTS})")
    if time["outputs"] is None and time["outputs_every"] is None:
        time["outputs"] = DEFAULT_OUTPUTS
    times = time["outputs"]
    if isinstance(times, list) and any(not 0 <= t <= time["t_final"] for t in times):
        raise ConfigError(f"time.outputs: times must lie in [0, t_final], got {times}")
    for key, section in (("dt", "time"), ("dt", "particles")):
        dt = data[section][key]
        if dt is not None and time["t_final"] / dt > MAX_STEPS:
            raise ConfigError(f"{section}.{key}: {dt:g} would take {time['t_final'] / dt:.3g} steps to reach "
                              f"t_final = {time['t_final']:g} (at most {MAX_STEPS:.0e})")


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


def trackers(data: Mapping[str, Any]) -> Trackers:
    """The compiled ``[[output.observables]]`` of validated config data (:mod:`meanfield.trackers`)."""
    try:
        return Trackers.from_config(data["output"]["observables"], output_times(data["time"]))
    except ExpressionError as exc:
        raise ConfigError(str(exc)) from None


def check_schedule_end(data: dict) -> None:
    """Refuse ``[[model.layers]]`` that end before ``time.t_final``, and a ``t_final`` beyond the last
    layer of ``[model.random]`` (also after a resume changes t_final)."""
    layers, t_final = data["model"]["layers"], data["time"]["t_final"]
    random = data["model"]["random"]
    if random is not None:
        depth = random["layers"] * random["eta"]
        if t_final > depth * (1.0 + 1e-12):
            raise ConfigError(f"time.t_final: {t_final:g} is beyond the last drawn layer (model.random: layers * eta "
                              f"= {depth:g}); lower t_final or add layers")
    if layers and isinstance(layers[-1].get("t_end"), (int, float)) and layers[-1]["t_end"] < t_final:
        raise ConfigError(f"model.layers[{len(layers) - 1}].t_end: the last layer ends at t = {layers[-1]['t_end']:g}, "
                          f"before time.t_final = {t_final:g}; add a layer or lower t_final")


def _check_mask(data: Mapping[str, Any]) -> None:
    """``[positions]`` only with ``model.mask = 'causal'``, and a causal run only of attention
    without atoms (the initial density's use of ``s`` is checked by :func:`make_initial_density`)."""
    m = data["model"]
    if m["mask"] != "causal":
        for key, value in data["positions"].items():
            if value is not None:
                raise ConfigError(f"positions.{key}: needs model.mask = 'causal' (a run without a mask has no "
                                  "positions)")
        return
    if data["positions"]["normalise"] and "softmax" in [m["attention"]] + [layer.get("attention")
                                                                            for layer in m["layers"] or []]:
        raise ConfigError("positions.normalise: needs model.attention = 'unnormalized' (softmax attention is "
                          "already normalised over positions)")
    if m["velocity"] != "attention":
        raise ConfigError("model.mask: 'causal' needs model.velocity = 'attention'")
    for key in ("capture", "initial"):
        if data["atoms"][key]:
            raise ConfigError(f"atoms.{key}: atoms are not supported with model.mask = 'causal' (set "
                              f"atoms.{key} = {'false' if key == 'capture' else '[]'} or model.mask = 'none')")


def _check_models(config: Config) -> None:
    """Build the layer schedule and initial density to check them, and bound the kernel concentration."""
    m = config.data["model"]
    if m["velocity"] == "rotation":
        for key in ("ffn", "layers"):
            if m[key] is not None:
                raise ConfigError(f"model.{key}: needs model.velocity = 'attention' (a prescribed rotation has no "
                                  "layers or feed-forward block)")
    if m["random"] is not None:
        _check_random(config.data)
        return
    try:
        d = particle_dimension(config.data)  # the PDE's d, unless particles.d says otherwise
        schedule = LayerSchedule.build(d, m)
        make_initial_density(config.data["initial"], d, causal=m["mask"] == "causal")
    except (ModelError, InitialDensityError) as exc:
        raise ConfigError(str(exc)) from None
    for layer, origin in zip(schedule.layers, schedule.origins):
        model = layer.attention
        kappa = 0.0 if model is None else max(model.beta * float(np.linalg.norm(h.interaction, 2)) for h in model.heads)
        if not kappa <= KAPPA_MAX:
            raise ConfigError(f"{origin}.beta: beta * ||Q^T K||_2 = {kappa:.3g} exceeds {KAPPA_MAX:g}: the attention "
                              "kernel is a Dirac mass in double precision")
    check_schedule_end(config.data)
    _check_atoms(config)
    if m["velocity"] == "rotation" and mesh_dimension(config.data) == 2 and m["rotation_axis"] != [0.0, 0.0, 1.0]:
        raise ConfigError("model.rotation_axis: on S1 the rotation is about the z axis")


def _check_random(data: dict) -> None:
    """A ``[model.random]`` schedule: its law, its weights file (if any) of the law's shapes, no
    written-out weights beside it, t_final within its depth.  The weights themselves are drawn
    (or read) by :class:`meanfield.problem.Problem`."""
    m = data["model"]
    if m["velocity"] != "attention":
        raise ConfigError("model.random: needs model.velocity = 'attention'")
    for key in ("Q", "K", "V", "heads", "ffn", "layers"):
        if m[key] is not None:
            raise ConfigError(f"model.{key}: give either model.random (drawn weights) or model.{key}, not both")
    try:
        law = RandomLayers.build(m["random"])
        if law.weights is not None:  # a weights file that does not fit the law is refused before any run
            DrawnWeights.read(law.weights, law, particle_dimension(data))
        make_initial_density(data["initial"], particle_dimension(data), causal=m["mask"] == "causal")
    except (ModelError, InitialDensityError) as exc:
        raise ConfigError(str(exc)) from None
    check_schedule_end(data)
    for key in ("capture", "initial"):
        if data["atoms"][key]:
            raise ConfigError(f"atoms.{key}: atoms are not supported with model.random")


def _check_atoms(config: Config) -> None:
    """Initial atoms in the mesh's dimension with masses that leave the density a share >= 0."""
    atoms, d = config.data["atoms"], mesh_dimension(config.data)
    for i, a in enumerate(atoms["initial"]):
        if len(a) != 1 + d:
            raise ConfigError(f"atoms.initial[{i}]: must be [mass, x_1, ..., x_{d}] on "
                              f"{config.data['mesh']['sphere']}, got {a!r}")
    total = sum(a[0] for a in atoms["initial"])
    if total > 1.0 + 1e-12:
        raise ConfigError(f"atoms.initial: the atoms' masses sum to {total:.6g} > 1 (the total mass is 1; the "
                          "density carries the rest)")
    if (atoms["capture"] or atoms["initial"]) and config.data["model"]["velocity"] != "attention":
        key = "capture" if atoms["capture"] else "initial"
        raise ConfigError(f"atoms.{key}: atoms need model.velocity = 'attention'")


def _t_final_given(user: Mapping[str, Any], overrides: list[str]) -> bool:
    time = user.get("time")
    return (isinstance(time, Mapping) and "t_final" in time) or any(
        parse_override(text)[0] == ["time", "t_final"] for text in overrides)


def _default_depth(data: dict) -> None:
    """``time.t_final`` defaults to the depth ``layers * eta`` of a ``[model.random]`` schedule."""
    random = data["model"]["random"]
    if isinstance(random, dict) and _positive_int(random.get("layers")) and _positive(random.get("eta")):
        data["time"]["t_final"] = random["layers"] * random["eta"]


def load_config(
    source: str | Path | Mapping | None = None,
    overrides: list[str] | None = None,
    validate_models: bool = True,
) -> Config:
    """Read, merge with defaults, override and validate a run configuration.

    Parameters
    ----------
    source
        A TOML file path, a mapping, or ``None`` for :data:`DEFAULT_CONFIG`.
    overrides
        ``section.key=value`` strings, applied after the file.
    validate_models
        Also build the model and initial density to check them (cheap).

    Raises
    ------
    ConfigError
        With a message naming the offending field.
    """
    base_dir = None
    user: Mapping[str, Any]
    if source is None:
        user, label, default_name = DEFAULT_CONFIG, "<default>", str(DEFAULT_CONFIG["name"])
    elif isinstance(source, Mapping):
        user, label, default_name = source, "<dict>", DEFAULT_NAME
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config: no such file: {path}")
        try:
            user = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config: cannot read {path}: {exc}") from None
        label, base_dir = str(path), path.parent
        default_name = path.stem if NAME_PATTERN.fullmatch(path.stem) else DEFAULT_NAME
    if not isinstance(user, Mapping):
        raise ConfigError("config: must be a table")
    for key, value in user.items():
        if key in SCHEMA and key and not isinstance(value, Mapping):
            raise ConfigError(f"{key}: must be a table")
    data: dict[str, Any] = {k: v[0] for k, v in SCHEMA[""].items()}
    for section, keys in SCHEMA.items():
        if section:
            data[section] = {k: copy.deepcopy(v[0]) for k, v in keys.items()}
    sphere = user.get("mesh", {}).get("sphere", SCHEMA["mesh"]["sphere"][0]) if isinstance(user.get("mesh"), Mapping) \
        else SCHEMA["mesh"]["sphere"][0]
    for text in overrides or []:
        override, value = parse_override(text)
        if override == ["mesh", "sphere"]:
            sphere = value
    data["initial"] = copy.deepcopy(DEFAULT_INITIAL.get(sphere, DEFAULT_INITIAL["S2"]))
    _merge(data, user)
    _apply_overrides(data, overrides or [])
    _check(data)
    _as_floats(data)
    if not _t_final_given(user, overrides or []):
        _default_depth(data)
    _check_mask(data)
    _resolve(data, base_dir, default_name)
    trackers(data)
    config = Config(data, label)
    if validate_models:
        _check_models(config)
    return config

"""Run configuration: TOML files, defaults, ``--set`` overrides and validation.

A config is a nested mapping with the sections of :data:`SCHEMA`.  :func:`load_config`
merges a file (or mapping) over the defaults, applies overrides, rejects unknown keys and
checks every value, raising one :class:`ConfigError` that names the field.  Nothing here is
expensive, so a bad config is refused before any mesh is built or file written.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .initial import InitialDensityError, make_initial_density
from .mesh import SPHERES
from .model import AttentionModel, ModelError
from .nonlocal_field.select import METHODS


class ConfigError(ValueError):
    """A config that cannot run; the message names the offending field."""


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


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


# section -> key -> (default, check, what the value must be)
SCHEMA: dict[str, dict[str, tuple[Any, Callable[[Any], bool], str]]] = {
    "": {"name": ("s2-clustering", lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")},
    "mesh": {
        "sphere": ("S2", _one_of(*SPHERES), f"one of {sorted(SPHERES)}"),
        "resolution": (None, _optional(lambda v: _positive_int(v) or v == 0),
                       "an integer >= 0 (S1: cells, S2: refinement level)"),
        "file": (None, _optional(lambda v: isinstance(v, str)), "a path to a mesh file meshio reads"),
    },
    "model": {
        "velocity": ("attention", _one_of("attention", "rotation"), "'attention' or 'rotation'"),
        "attention": ("softmax", _one_of("softmax", "unnormalized"), "'softmax' or 'unnormalized'"),
        "beta": (4.0, _positive, "a number > 0"),
        "Q": (None, _anything, "a d x d matrix"),
        "K": (None, _anything, "a d x d matrix"),
        "V": (None, _anything, "a d x d matrix"),
        "heads": (None, _optional(lambda v: isinstance(v, list) and all(isinstance(h, dict) for h in v)),
                  "a list of tables with Q, K, V, weight"),
        "rotation_rate": (1.0, _is_number, "a number (angular velocity of the prescribed rotation)"),
        "rotation_axis": ([0.0, 0.0, 1.0], lambda v: isinstance(v, list) and len(v) == 3 and all(map(_is_number, v)),
                          "a 3-vector"),
    },
    "initial": {"kind": ("vmf", _anything, "an initial-density kind")},  # parameters checked by initial.py
    "time": {
        "t_final": (10.0, _positive, "a number > 0"),
        "cfl": (0.5, lambda v: _positive(v) and v <= 1, "a number in (0, 1]"),
        "outputs": (20, lambda v: _positive_int(v) or (isinstance(v, list) and len(v) > 0 and all(map(_is_number, v))),
                    "a positive count or a list of times"),
        "dt": (None, _optional(_positive), "a fixed time step > 0 (default: adaptive)"),
        "dt_max": (None, _optional(_positive), "an upper bound > 0 of the adaptive time step"),
    },
    "scheme": {
        "kind": ("fv", _one_of("fv", "dg1"), "'fv' (first-order finite volumes) or 'dg1' (second-order DG on P2 cells)"),
        "limiter": (True, lambda v: isinstance(v, bool), "true or false (dg1: Zhang-Shu positivity limiter)"),
    },
    "nonlocal": {
        "method": ("auto", _one_of(*METHODS), f"one of {METHODS}"),
        "tol": (1e-10, lambda v: _positive(v) and v < 1, "a number in (0, 1)"),
    },
    "particles": {
        "n": (None, _optional(_positive_int), "a positive integer (number of tokens)"),
        "seed": (0, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
        "d": (None, _optional(lambda v: _positive_int(v) and v >= 2),
              "an integer >= 2 (tokens on S^{d-1}; default: the mesh's d)"),
        "integrator": ("rk4", _one_of("rk4"), "'rk4'"),
        "dt": (None, _optional(_positive), "a time step > 0 (default: 0.25 / Lipschitz bound of the field)"),
        "sampler": ("auto", _one_of("auto", "exact", "rejection", "mesh", "quantile", "fibonacci"),
                    "'auto', 'exact', 'rejection' or 'mesh'"),
    },
    "output": {
        "dir": (None, _optional(lambda v: isinstance(v, str)), "a directory path (default runs/<name>)"),
        "xdmf": (True, lambda v: isinstance(v, bool),
                 "true or false (ParaView output: density.xdmf for fv, density.bp (VTX) for dg1)"),
    },
}

DEFAULT_INITIAL = {"kind": "vmf", "centers": [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, -0.2]],
                   "kappas": [2.0, 2.0, 2.0], "weights": [1.0, 1.0, 1.0]}
# The embedded default run (`meanfield run` without a file; `make demo`): clustering of a
# three-bump density on the icosphere of level 4 under softmax attention.
DEFAULT_CONFIG: dict[str, Any] = {
    "name": "s2-clustering",
    "mesh": {"sphere": "S2", "resolution": 4},
    "model": {"attention": "softmax", "beta": 4.0},
    "initial": DEFAULT_INITIAL,
    "time": {"t_final": 6.0, "cfl": 0.5, "outputs": 12},
}


@dataclass
class Config:
    """A validated, fully resolved run configuration.

    Attributes
    ----------
    data
        The nested mapping (every key present), as written to the run directory.
    source
        Where it came from (a path, or ``"<default>"`` / ``"<dict>"``).
    """

    data: dict
    source: str = "<dict>"

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def d(self) -> int:
        return SPHERES[self.data["mesh"]["sphere"]]

    @property
    def particle_d(self) -> int:
        """Ambient dimension of the particle system: ``particles.d``, else the mesh's."""
        return self.data["particles"]["d"] or self.d

    def section(self, name: str) -> dict:
        return self.data[name]

    def model(self, d: int | None = None) -> AttentionModel:
        """The attention model of the ``[model]`` section, in dimension ``d`` (default: the mesh's)."""
        m = self.data["model"]
        return AttentionModel.build(d or self.d, m["beta"], m["attention"], m["Q"], m["K"], m["V"], m["heads"])

    def initial_density(self, d: int | None = None):
        """The :class:`~meanfield.initial.InitialDensity` of the ``[initial]`` section (default d: the mesh's)."""
        return make_initial_density(self.data["initial"], d or self.d)

    def output_times(self) -> np.ndarray:
        """Sorted output times, always including 0 and t_final."""
        t = self.data["time"]
        out = t["outputs"]
        times = np.linspace(0.0, t["t_final"], out + 1) if isinstance(out, int) else np.asarray(out, float)
        return np.unique(np.concatenate([[0.0], times, [t["t_final"]]]))

    def output_dir(self) -> Path:
        return Path(self.data["output"]["dir"] or Path("runs") / self.name)

    def to_toml(self) -> str:
        import tomli_w

        return tomli_w.dumps(_drop_none(self.data))


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


def _merge(base: dict, update: Mapping, prefix: str = "") -> None:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict) and key != "initial":
            _merge(base[key], value, f"{prefix}{key}.")
        elif isinstance(value, Mapping) and key == "initial" and not prefix:
            base[key] = copy.deepcopy(dict(value)) if "kind" in value else {**base[key], **copy.deepcopy(dict(value))}
        else:
            base[key] = copy.deepcopy(value)


def _check(data: dict) -> None:
    for key in data:
        if key not in SCHEMA[""] and key not in SCHEMA:
            raise ConfigError(f"{key}: unknown key or section; sections are {sorted(k for k in SCHEMA if k)}")
    for section, keys in SCHEMA.items():
        table = data if section == "" else data.get(section)
        if section and not isinstance(table, dict):
            raise ConfigError(f"{section}: must be a table")
        for key in list(table) if section and section != "initial" else []:
            if key not in keys:
                raise ConfigError(f"{section}.{key}: unknown key; allowed: {sorted(keys)}")
        for key, (_, check, what) in keys.items():
            if key in table and not check(table[key]):
                name = f"{section}.{key}" if section else key
                raise ConfigError(f"{name}: must be {what}, got {table[key]!r}")


def _resolve(data: dict, base_dir: Path | None) -> None:
    mesh = data["mesh"]
    if mesh["file"] is None and mesh["resolution"] is None:
        mesh["resolution"] = 4 if mesh["sphere"] == "S2" else 256
    if mesh["file"] is not None:
        path = Path(mesh["file"])
        if not path.is_absolute() and base_dir is not None and not path.exists():
            path = base_dir / path
        if not path.is_file():
            raise ConfigError(f"mesh.file: no such file: {mesh['file']}")
        mesh["file"] = str(path)
    times = data["time"]["outputs"]
    if isinstance(times, list) and any(not 0 <= t <= data["time"]["t_final"] for t in times):
        raise ConfigError(f"time.outputs: times must lie in [0, t_final], got {times}")


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
    if source is None:
        user, label = DEFAULT_CONFIG, "<default>"
    elif isinstance(source, Mapping):
        user, label = source, "<dict>"
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError(f"config: no such file: {path}")
        try:
            user = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None
        label, base_dir = str(path), path.parent
    data: dict[str, Any] = {k: v[0] for k, v in SCHEMA[""].items()}
    for section, keys in SCHEMA.items():
        if section:
            data[section] = {k: copy.deepcopy(v[0]) for k, v in keys.items()}
    data["initial"] = copy.deepcopy(DEFAULT_INITIAL)
    if not isinstance(user, Mapping):
        raise ConfigError("config: must be a table")
    for key, value in user.items():
        if key in SCHEMA and key and not isinstance(value, Mapping):
            raise ConfigError(f"{key}: must be a table")
    _merge(data, user)
    for text in overrides or []:
        keys, value = parse_override(text)
        table = data
        for k in keys[:-1]:
            if not isinstance(table.get(k), dict):
                raise ConfigError(f"{'.'.join(keys)}: unknown section {k!r}")
            table = table[k]
        if keys == ["initial", "kind"] and value != table.get("kind"):
            table.clear()  # another kind: the previous kind's parameters no longer apply
        table[keys[-1]] = value
    _check(data)
    _resolve(data, base_dir)
    config = Config(data, label)
    if validate_models:
        try:
            config.model(config.particle_d)
            config.initial_density(config.particle_d)
        except (ModelError, InitialDensityError) as exc:
            raise ConfigError(str(exc)) from None
        if data["model"]["velocity"] == "rotation" and config.d == 2 and data["model"]["rotation_axis"] != [0.0, 0.0, 1.0]:
            raise ConfigError("model.rotation_axis: on S1 the rotation is about the z axis")
    return config

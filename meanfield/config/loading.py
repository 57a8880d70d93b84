"""Loading a run configuration: TOML files, defaults, ``--set`` overrides, resolved names and paths.

:func:`load_config` merges a file (or mapping) over the defaults of :data:`~.schema.SCHEMA`,
applies overrides, rejects unknown keys and checks every value and the sections against each
other (:mod:`.checks`), raising one :class:`~.schema.ConfigError` that names the field.  Nothing
here is expensive, so a bad config is refused before any mesh is built or file written.  What
the configuration asks for, as typed objects (model, initial density, output times, ...), is
built from a config, and checked as it is built, by :class:`meanfield.problem.Problem`.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..masks import mask_kind
from ..model import did_you_mean
from ..spheres import DEFAULT_SPHERE, SPHERES, sphere_named
from .checks import check_mask, check_model, check_times
from .schema import (
    DEFAULT_CONFIG,
    DEFAULT_INITIAL,
    DEFAULT_NAME,
    DEFAULT_OUTPUTS,
    NAME_PATTERN,
    OUTPUT_KEYS,
    SCHEMA,
    ConfigError,
    as_floats,
    check_keys,
    default_core_cells,
    is_positive,
    is_positive_int,
)


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
        from ..toml_text import config_toml

        unset = [f"{s}.{k}" if s else k for s, k in _flat_none(self.data)]
        head = f"# meanfield run config (resolved from {self.source})\n"
        if unset:
            head += "# unset (defaults apply): " + ", ".join(unset) + "\n"
        sections = {k: v for k, v in _drop_none(self.data).items() if v != {}}  # [positions] of a run without mask
        return config_toml(sections, head)


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


def _resolve(data: dict, base_dir: Path | None, default_name: str) -> None:
    if data["name"] is None:
        data["name"] = default_name
    mesh = data["mesh"]
    if mesh["file"] is None and mesh["resolution"] is None:
        mesh["resolution"] = sphere_named(mesh["sphere"]).default_resolution
    mask_kind(data["model"]["mask"]).resolve(data["positions"])
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
    if time["outputs"] is None and time["outputs_every"] is None:
        time["outputs"] = DEFAULT_OUTPUTS


def _t_final_given(user: Mapping[str, Any], overrides: list[str]) -> bool:
    time = user.get("time")
    return (isinstance(time, Mapping) and "t_final" in time) or any(
        parse_override(text)[0] == ["time", "t_final"] for text in overrides)


def _default_initial_for_d(data: dict, user: Mapping[str, Any], overrides: list[str], sphere: Any) -> None:
    """Tokens in another dimension than the mesh's sphere's (``particles.d``) start uniform on
    S^{d-1} unless the config gives ``[initial]`` of its own: the sphere's default vMF centres
    (also the embedded default config's) are vectors of that sphere's dimension only."""
    d = data["particles"].get("d")
    own = SPHERES[sphere] if isinstance(sphere, str) and sphere in SPHERES else None
    if own is None or not is_positive_int(d) or d == own.d:
        return
    given = user.get("initial", own.default_initial) != own.default_initial or any(
        parse_override(text)[0][0] == "initial" for text in overrides)
    if not given:
        data["initial"] = {"kind": "uniform"}


def _default_depth(data: dict) -> None:
    """``time.t_final`` defaults to the depth ``layers * eta`` of a ``[model.random]`` schedule."""
    random = data["model"]["random"]
    if isinstance(random, dict) and is_positive_int(random.get("layers")) and is_positive(random.get("eta")):
        data["time"]["t_final"] = random["layers"] * random["eta"]


def load_config(
    source: str | Path | Mapping | None = None,
    overrides: list[str] | None = None,
) -> Config:
    """Read, merge with defaults, override and validate a run configuration.

    Parameters
    ----------
    source
        A TOML file path, a mapping, or ``None`` for :data:`DEFAULT_CONFIG`.
    overrides
        ``section.key=value`` strings, applied after the file.

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
    data["initial"] = copy.deepcopy(DEFAULT_INITIAL.get(sphere, DEFAULT_SPHERE.default_initial))
    _merge(data, user)
    _apply_overrides(data, overrides or [])
    _default_initial_for_d(data, user, overrides or [], sphere)
    check_keys(data)
    as_floats(data)
    if not _t_final_given(user, overrides or []):
        _default_depth(data)
    check_mask(data)
    _resolve(data, base_dir, default_name)
    check_times(data)
    check_model(data)
    return Config(data, label)

"""The free parameters of a fit: config paths, expanded to numbers, read and written in a config.

A parameter is given as ``--wrt`` gives one (:func:`meanfield.studies.response.parse_parameter`),
with two extensions:

- ``[*]`` stands for every index of a list: ``model.layers[*].beta`` is the beta of every
  layer, ``model.heads[*].weight`` every head's weight;
- a path that ends at a matrix or a vector stands for all its entries: ``model.layers[2].V``
  is the d x d entries ``model.layers[2].V[i][j]``, ``model.ffn.b`` the entries of b.

A key that a layer inherits (``model.layers[2].V`` where that layer sets no V) is first
written into the layer with the value it inherits (from the layers before it, then
``[model]``, then the default: the identity for Q, K and V, 1 for a head's weight, the schema's
beta), so that a fitted layer's weights are its own.  The numbers are then read and written
by their expanded paths, the names of fit.csv's columns.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import SCHEMA, ConfigError
from ..model import did_you_mean
from ..spheres import sphere_named

_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[(?:\d+|\*)\])*)")
#: Keys a layer inherits from the layers before it and from ``[model]``.
_INHERITED = ("attention", "beta", "Q", "K", "V", "heads", "ffn")
#: Parameters that must stay positive (a lower bound for the optimiser).
POSITIVE = frozenset({"beta"})


@dataclass(frozen=True)
class Parameter:
    """One free number: its path as text and its keys and indices into the config data."""

    name: str
    keys: tuple[str | int, ...]

    @property
    def positive(self) -> bool:
        """Whether the parameter must stay > 0 (``beta``)."""
        return self.keys[-1] in POSITIVE


def _split(text: str) -> list[str | int]:
    keys: list[str | int] = []
    for part in text.split("."):
        match = _PART.fullmatch(part)
        if match is None:
            raise ConfigError(f"--param {text!r}: expected a config path such as model.beta, model.layers[*].V "
                              "or model.Q[0][1]")
        keys.append(match.group(1))
        keys.extend("*" if i == "*" else int(i) for i in re.findall(r"\[(\d+|\*)\]", match.group(2)))
    if keys[0] != "model":
        raise ConfigError(f"--param {text!r}: a parameter of the model (model.beta, model.layers[*].V, ...)")
    return keys


def _name(keys: Sequence[str | int]) -> str:
    out = ""
    for key in keys:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


def _inherited(model: dict, layer: int, key: str, d: int) -> Any:
    """The value of ``key`` that layer ``layer`` inherits (the identity for an unset Q, K, V)."""
    for spec in reversed(model["layers"][:layer]):
        if spec.get(key) is not None:
            return copy.deepcopy(spec[key])
    if model.get(key) is not None:
        return copy.deepcopy(model[key])
    if key in ("Q", "K", "V"):
        return np.eye(d).tolist()
    return copy.deepcopy(SCHEMA["model"][key][0]) if key in SCHEMA["model"] else None


def _materialise(data: dict, keys: list[str | int], text: str) -> None:
    """Write the inherited or default value where ``keys`` points into an unset key."""
    d = sphere_named(data["mesh"]["sphere"]).d
    model = data["model"]
    if len(keys) >= 4 and keys[1] == "layers" and isinstance(keys[2], int) and isinstance(keys[3], str):
        layers = model.get("layers") or []
        if keys[2] >= len(layers):
            raise ConfigError(f"--param {text}: model.layers has {len(layers)} layers")
        spec = layers[keys[2]]
        if keys[3] in _INHERITED and spec.get(keys[3]) is None:
            spec[keys[3]] = _inherited(model, keys[2], keys[3], d)
    elif len(keys) >= 2 and keys[1] in ("Q", "K", "V") and model.get(keys[1]) is None and model.get("heads") is None:
        model[keys[1]] = np.eye(d).tolist()
    parent: Any = data
    for key in keys[:-1]:
        parent = parent[key] if _has(parent, key) else None
        if parent is None:
            return
    last = keys[-1]
    if isinstance(parent, dict) and parent.get(last) is None:
        if last in ("Q", "K", "V"):
            parent[last] = np.eye(d).tolist()
        elif last == "weight":
            parent[last] = 1.0


def _unshared(node: Any) -> Any:
    """A copy of nested tables and lists in which no two places share a container
    (``copy.deepcopy`` keeps the sharing of a Python config that puts one table in several
    layers, and setting one layer's weight would then set them all)."""
    if isinstance(node, dict):
        return {key: _unshared(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_unshared(value) for value in node]
    return copy.deepcopy(node)


def _has(container: Any, key: str | int) -> bool:
    if isinstance(key, int):
        return isinstance(container, list) and 0 <= key < len(container)
    return isinstance(container, dict) and key in container


def _expand(data: dict, keys: list[str | int], done: list[str | int], text: str) -> list[tuple[str | int, ...]]:
    """The numeric leaves under ``keys`` (wildcards and whole arrays expanded)."""
    node: Any = data
    for i, key in enumerate(keys):
        if key == "*":
            if not isinstance(node, list):
                raise ConfigError(f"--param {text}: {_name(done + keys[:i]) or 'it'} is not a list ([*])")
            return [leaf for j in range(len(node)) for leaf in _expand(data, done + keys[:i] + [j] + keys[i + 1:],
                                                                        [], text)]
        if isinstance(node, dict) and node.get(key) is None:
            _materialise(data, done + keys[: i + 1], text)
        if isinstance(node, list) and not _has(node, key):
            raise ConfigError(f"--param {text}: {_name(done + keys[:i])} has {len(node)} entries (indices from 0)")
        if not _has(node, key):
            where = _name(done + keys[: i + 1])
            known = [k for k in node if node[k] is not None] if isinstance(node, dict) else []
            hint = did_you_mean(str(key), known) if known and isinstance(key, str) else ""
            raise ConfigError(f"--param {text}: {where} is not a parameter of the config{hint}")
        node = node[key]
        if node is None:
            raise ConfigError(f"--param {text}: {_name(done + keys[: i + 1])} is not set in the config")
    path = tuple(done + keys)
    if isinstance(node, list):
        return [leaf for j in range(len(node)) for leaf in _expand(data, [*path, j], [], text)]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ConfigError(f"--param {text}: {_name(path)} is not a number in the config (got {node!r})")
    return [path]


def _resolve(data: dict, keys: Sequence[str | int]) -> Any:
    node: Any = data
    for key in keys:
        node = node[key] if _has(node, key) else None
        if node is None:
            return None
    return node


class Parameters:
    """The free numbers of a fit in one config (module docstring).

    Parameters
    ----------
    data
        A resolved config's data (:attr:`meanfield.config.Config.data`); not changed.
    texts
        Parameter paths (``--param``), each expanded to numbers; a number named twice is refused.

    Attributes
    ----------
    base
        The config data with every freed inherited key written into its layer.
    items
        The expanded :class:`Parameter` list, in the order given.
    """

    def __init__(self, data: dict, texts: Sequence[str]) -> None:
        if not texts:
            raise ConfigError("--param: give at least one parameter to fit (e.g. model.beta)")
        self.base = _unshared(data)
        if self.base["model"].get("random") is not None:
            raise ConfigError("--param: a [model.random] schedule has no weights in the config to fit; write them "
                              "out as [[model.layers]]")
        items: list[Parameter] = []
        for text in texts:
            keys = _split(text.strip())
            if len(keys) >= 3 and keys[1] == "layers" and not self.base["model"].get("layers"):
                raise ConfigError(f"--param {text}: the config has no [[model.layers]]")
            for path in _expand(self.base, keys, [], text):
                items.append(Parameter(_name(path), path))
        names = [p.name for p in items]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"--param: {twice[0]} is given twice")
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.items]

    def values(self, data: dict | None = None) -> np.ndarray:
        """The parameters' values in ``data`` (default: :attr:`base`)."""
        data = self.base if data is None else data
        return np.array([float(_resolve(data, p.keys)) for p in self.items])

    def apply(self, theta: np.ndarray, data: dict | None = None) -> dict:
        """A copy of ``data`` (default :attr:`base`) with the parameters set to ``theta``."""
        out = _unshared(self.base if data is None else data)
        for p, value in zip(self.items, np.asarray(theta, dtype=float)):
            parent = _resolve(out, p.keys[:-1])
            parent[p.keys[-1]] = float(value)
        return out

    def bounds(self) -> list[tuple[float | None, float | None]]:
        """The optimiser's bounds: beta > 0 (kept above 1e-6), the rest free."""
        return [(1e-6, None) if p.positive else (None, None) for p in self.items]

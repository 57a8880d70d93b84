"""The configuration schema: sections, keys, defaults, what each value must be, and the key checks.

A config is a nested mapping with the sections of :data:`SCHEMA`; each key has a default, a
check of its value and a description of what the value must be (the words of the error and
of the generated configuration page).  The schema names the spheres, schemes and field
methods without importing them (:mod:`meanfield.choices`).

Bounds that protect a run from input that would never finish or never fit: at most
:data:`MAX_OUTPUTS` output times, a fixed step giving at most :data:`MAX_STEPS` steps, and a
kernel concentration ``beta ||Q^T K||_2`` of at most :data:`KAPPA_MAX` (checked where the
problem builds its layers, :class:`meanfield.problem.Problem`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..choices import FIELD_METHODS, FIELD_TOL, SCHEME_DESCRIPTIONS, SPHERES, STEP_TOL
from ..layers import attention_settings
from ..masks import DEFAULT_SLICES, mask_names
from ..model import did_you_mean
from ..spheres import DEFAULT_SPHERE, sphere_named
from ..spheres import SPHERES as SPHERE_DESCRIPTORS


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
#: Names of the particle samplers (``meanfield.particles.sampling.SAMPLERS`` must agree).
SAMPLER_NAMES: tuple[str, ...] = ("auto", "exact", "rejection", "mesh", "quantile", "fibonacci")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))


def is_positive(v: Any) -> bool:
    return _is_number(v) and v > 0


def is_positive_int(v: Any) -> bool:
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
    return is_positive(v) or (isinstance(v, str) and re.fullmatch(r"\s*[1-9][0-9]*\s+steps?\s*", v) is not None)


def _axis(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and all(map(_is_number, v)) and any(x != 0 for x in v)


def _atom_list(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(a, list) and len(a) >= 3 and all(map(_is_number, a)) and a[0] > 0 and any(x != 0 for x in a[1:])
        for a in v)


def _outputs(v: Any) -> bool:
    if is_positive_int(v):
        return v <= MAX_OUTPUTS
    return isinstance(v, list) and 0 < len(v) <= MAX_OUTPUTS and all(map(_is_number, v))


# section -> key -> (default, check, what the value must be)
SCHEMA: dict[str, dict[str, tuple[Any, Callable[[Any], bool], str]]] = {
    "": {"name": (None, _optional(_plain_name), "a plain name (letters, digits, '.', '_', '-'; no path "
                                                "separators; default: the config file's name)")},
    "mesh": {
        "sphere": (DEFAULT_SPHERE.name, _one_of(*SPHERES), f"one of {sorted(SPHERES)}"),
        "resolution": (None, _optional(lambda v: is_positive_int(v) or v == 0),
                       "an integer >= 0 (S1: cells, S2: refinement level)"),
        "file": (None, _optional(lambda v: isinstance(v, str) and v != ""), "a path to a mesh file meshio reads"),
    },
    "model": {
        "velocity": ("attention", _one_of("attention", "rotation"), "'attention' or 'rotation'"),
        "attention": ("softmax", lambda v: v in attention_settings(),
                      "a registered attention kind ('softmax', 'unnormalized', ...) or 'none' "
                      "(the feed-forward block alone)"),
        "beta": (4.0, is_positive, "a number > 0"),
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
                   "a table with layers, eta, heads, qk_std, v_std, value, seed, ffn_width, ffn_activation, weights, "
                   "per_prompt ([model.random]: weights drawn at random for every layer and head)"),
        "rotation_rate": (1.0, _is_number, "a number (angular velocity of the prescribed rotation)"),
        "rotation_axis": ([0.0, 0.0, 1.0], _axis, "a non-zero 3-vector"),
        "mask": ("none", lambda v: v in mask_names(), "'none' (every token attends to every token) or 'causal' (a "
                 "decoder: the token at position s attends to the positions up to s)"),
    },
    "positions": {
        "slices": (None, _optional(is_positive_int),
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
        "t_final": (10.0, is_positive, "a number > 0"),
        "cfl": (0.5, lambda v: is_positive(v) and v <= 1, "a number in (0, 1]"),
        "outputs": (None, _optional(_outputs), f"a positive count or a non-empty list of times (at most {MAX_OUTPUTS}; "
                                               f"default {DEFAULT_OUTPUTS} unless time.outputs_every is given)"),
        "outputs_every": (None, _optional(is_positive), "a model-time interval > 0 between outputs (instead of "
                                                      "time.outputs)"),
        "dt": (None, _optional(is_positive), "a fixed time step > 0 (default: adaptive)"),
        "dt_max": (None, _optional(is_positive), "an upper bound > 0 of the adaptive time step"),
        "tol": (STEP_TOL, lambda v: is_positive(v) and v < 1,
                "a number in (0, 1): the adaptive step's error tolerance, relative to the change of a step"),
        "wall_limit": (None, _optional(is_positive),
                       "seconds > 0 after which the run checkpoints and stops (status 'interrupted')"),
    },
    "scheme": {
        "kind": ("fv", _one_of(*SCHEME_DESCRIPTIONS),
                 " or ".join(f"'{k}' ({text})" for k, text in SCHEME_DESCRIPTIONS.items())),
        "limiter": (True, lambda v: isinstance(v, bool), "true or false (dg1: Zhang-Shu positivity limiter)"),
    },
    "nonlocal": {
        "method": ("auto", _one_of(*FIELD_METHODS), f"one of {FIELD_METHODS}"),
        "tol": (FIELD_TOL, lambda v: is_positive(v) and v < 1, "a number in (0, 1)"),
        "threads": (None, _optional(is_positive_int),
                    "threads per MPI rank, a positive integer (default: MEANFIELD_NUM_THREADS or 1)"),
        "direct_sums": (False, lambda v: isinstance(v, bool),
                        "true or false: the fast field sums exactly over a rank's few mesh points where that is "
                        "cheaper than a NUFFT (many ranks); rank counts then agree to the NUFFT's accuracy "
                        "(below tol / 10), not round-off"),
    },
    "particles": {
        "n": (None, _optional(is_positive_int), "a positive integer (number of tokens)"),
        "seed": (0, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
        "d": (None, _optional(lambda v: is_positive_int(v) and v >= 2),
              "an integer >= 2 (tokens on S^{d-1}; default: the mesh's d; another d starts uniform "
              "without an [initial] of the config's own)"),
        "integrator": ("rk4", _one_of("rk4", "ssprk3", "residual"),
                       "'rk4', 'ssprk3' (the PDE's stepper, renormalised after every stage) or 'residual' (with "
                       "[model.random]: one step x <- normalise(x + eta X(x)) per layer, a transformer's discrete "
                       "residual update)"),
        "dt": (None, _optional(is_positive), "a time step > 0 (default: 0.25 / Lipschitz bound of the field)"),
        "sampler": ("auto", _one_of(*SAMPLER_NAMES), f"one of {SAMPLER_NAMES}"),
        "prompts": (1, is_positive_int,
                    "an integer >= 1 (independent prompts of n tokens moved together by the batched engine: prompt "
                    "b is the run with particles.seed + b)"),
        "device": ("cpu", _one_of("cpu", "gpu"),
                   "'cpu' (numpy) or 'gpu' (JAX on a GPU, pip install 'meanfield[gpu]' with CUDA); 'gpu' runs the "
                   "batched engine"),
        "precision": ("float64", _one_of("float64", "float32"),
                      "'float64' or 'float32' (the batched engine's numbers; float32 runs the batched engine)"),
    },
    "atoms": {
        "capture": (False, lambda v: isinstance(v, bool),
                    "true or false (move collapsed clusters' core mass into atoms, see meanfield.atoms)"),
        "core_level": (0.05, lambda v: is_positive(v) and v < 1,
                       "a number in (0, 1) (a basin's core: its cells above core_level times its peak)"),
        "core_cells": (None, _optional(is_positive_int),
                       "a positive integer (most cells of a core that is captured; default: a core as wide as "
                       "7 cells of the level-4 icosphere on S2 (a vertex star; 28 on level 5), 3 of 1024 cells on "
                       "S1, and never fewer than 7 / 3)"),
        "min_height": (20.0, is_positive, "a number > 0 (least peak density of a capture, in units of the "
                                        "mean density)"),
        "core_fraction": (0.9, lambda v: is_positive(v) and v <= 1,
                          "a number in (0, 1] (least share of its basin's mass a captured core holds)"),
        "merge_distance": (1e-3, lambda v: _is_number(v) and v >= 0,
                           "an angle >= 0 in radians (atoms closer than this merge)"),
        "absorb_mass": (1e-6, lambda v: _is_number(v) and 0 <= v < 1,
                        "a number in [0, 1) (when the density's mass is at most this, it all goes to the "
                        "atoms and the run continues with atoms alone, free of the density's CFL step; "
                        "0: never)"),
        "lipschitz_step": (1.0, is_positive, "a number > 0 (atoms step at most cfl * lipschitz_step / L, L the "
                                           "field's Lipschitz bound; SSP-RK3 is stable up to 2.5)"),
        "initial": ([], _atom_list, "a list of [mass, x_1, ..., x_d] lists (initial atoms: mass > 0, a "
                                    "non-zero point, normalised onto the sphere)"),
    },
    "output": {
        "dir": (None, _optional(lambda v: isinstance(v, str) and v != ""), "a directory path (default runs/<name>)"),
        "xdmf": (True, lambda v: isinstance(v, bool),
                 "true or false (ParaView files density.xdmf over run.nc)"),
        "checkpoint_every": (600.0, is_positive, "seconds of wall time > 0 between checkpoints (besides every output)"),
        "diagnostics": (True, lambda v: isinstance(v, bool),
                        "true or false (particle runs: diagnostics.csv and inner_products.png once the outputs are "
                        "written)"),
        "log_every": (None, _optional(_log_every),
                      "seconds of wall time > 0 between progress lines in the log, or \"N steps\" (default: at every "
                      "tenth of the model time and every 60 s between)"),
        "observables": ([], lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
                        "a list of tables with name, expression and optionally every ([[output.observables]]: "
                        "observables of one's own, e.g. expression = 'integral(rho * z)', written as columns of "
                        "observables.csv and variables of run.nc; PDE runs)"),
    },
    "fit": {
        "params": (None, _optional(lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) for x in v)),
                   "a non-empty list of parameter paths (model.beta, model.layers[*].V, ...)"),
        "target": (None, _anything, "a density expression, an [initial] table, a run directory, a .npy file of "
                                    "tokens, or a list of numbers (observables' values)"),
        "pairs": (None, _optional(lambda v: isinstance(v, list) and len(v) > 0 and all(isinstance(x, dict)
                                                                                      for x in v)),
                  "a non-empty list of tables with input and target ([[fit.pairs]])"),
        "loss": (None, _optional(_one_of("mmd", "observables", "ot", "w2")), "'mmd', 'observables', 'ot' or 'w2'"),
        "observables": (None, _optional(lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
                        "a list of observables, 'EXPR' or 'NAME=EXPR'"),
        "kappa": (None, _optional(is_positive), "a number > 0 (default 1)"),
        "epsilon": (None, _optional(is_positive), "a number > 0 (default 0.05)"),
        "running": (None, _optional(lambda v: isinstance(v, bool)), "true or false (default false)"),
        "l2": (None, _optional(lambda v: _is_number(v) and v >= 0), "a number >= 0 (default 0)"),
        "l1": (None, _optional(lambda v: _is_number(v) and v >= 0), "a number >= 0 (default 0)"),
        "max_iter": (None, _optional(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                     "an integer >= 0 (default 100)"),
        "gtol": (None, _optional(is_positive), "a number > 0 (default 1e-10)"),
    },
}

#: Default initial densities, per sphere, when a config has no ``[initial]`` table: three
#: von Mises-Fisher bumps that merge into one cluster.
DEFAULT_INITIAL: dict[str, dict[str, Any]] = {name: s.default_initial for name, s in SPHERE_DESCRIPTORS.items()}
# The embedded default run (`meanfield run` without a file; `make demo`): clustering of a
# three-bump density on the icosphere of level 4 under softmax attention.
DEFAULT_CONFIG: dict[str, Any] = {
    "name": "s2-clustering",
    "mesh": {"sphere": DEFAULT_SPHERE.name, "resolution": 4},
    "model": {"attention": "softmax", "beta": 4.0},
    "initial": DEFAULT_SPHERE.default_initial,
    "time": {"t_final": 6.0, "cfl": 0.5, "outputs": 12},
}
#: Name of runs from a mapping without ``name``.
DEFAULT_NAME = "run"


def _belongs(key: str, here: str | None) -> str:
    """``; `key` belongs in [section]`` when another section of the schema has this key, else ``""``."""
    homes = [s or "the top level" for s, keys in SCHEMA.items() if s != here and key in keys]
    return f"; `{key}` belongs in " + " or ".join(h if h == "the top level" else f"[{h}]" for h in homes) \
        if homes else ""


def check_keys(data: dict) -> None:
    """Refuse unknown sections and keys (naming where a misplaced key belongs) and values that fail
    their key's check (:data:`SCHEMA`)."""
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


def as_floats(data: dict) -> None:
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
CORE_CELLS = {name: s.core_cells for name, s in SPHERE_DESCRIPTORS.items()}


def default_core_cells(sphere: str, resolution: int | None) -> int:
    """The default ``atoms.core_cells``: the reference core of :data:`CORE_CELLS` in cells of this
    mesh (an icosphere of level ``resolution``, a circle of ``resolution`` cells), never fewer
    than the reference's count; for a mesh file (``resolution`` None) that count itself."""
    cells, reference = CORE_CELLS[sphere]
    if resolution is None:
        return cells
    return max(cells, round(cells * sphere_named(sphere).cells(resolution) / reference))

"""The checks across sections of a config: what one key's value allows of another's.

Each check reads the config's data alone (no model, density or mesh is built), so a config
that contradicts itself is refused by :func:`~meanfield.config.load_config`.  What can only be
checked by interpreting the config (the layer schedule, the initial density, the drawn weights,
the kernel concentration, user observables) is checked where the problem builds it, once
(:class:`meanfield.problem.Problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..attention import Attention, attention_kind, attention_names
from ..choices import SPHERES
from ..masks import mask_kind
from .schema import MAX_OUTPUTS, MAX_STEPS, ConfigError


def check_times(data: Mapping[str, Any]) -> None:
    """One way of setting the output times, at most :data:`MAX_OUTPUTS` of them, listed times in
    [0, t_final], and fixed steps of at most :data:`MAX_STEPS` steps."""
    time = data["time"]
    if time["outputs"] is not None and time["outputs_every"] is not None:
        raise ConfigError("time.outputs_every: give time.outputs (a count or a list of times) or time.outputs_every "
                          "(an interval), not both")
    if time["outputs_every"] is not None and time["t_final"] / time["outputs_every"] > MAX_OUTPUTS:
        raise ConfigError(f"time.outputs_every: {time['outputs_every']:g} would make "
                          f"{time['t_final'] / time['outputs_every']:.3g} outputs to t_final = {time['t_final']:g} "
                          f"(at most {MAX_OUTPUTS})")
    times = time["outputs"]
    if isinstance(times, list) and any(not 0 <= t <= time["t_final"] for t in times):
        raise ConfigError(f"time.outputs: times must lie in [0, t_final], got {times}")
    for key, section in (("dt", "time"), ("dt", "particles")):
        dt = data[section][key]
        if dt is not None and time["t_final"] / dt > MAX_STEPS:
            raise ConfigError(f"{section}.{key}: {dt:g} would take {time['t_final'] / dt:.3g} steps to reach "
                              f"t_final = {time['t_final']:g} (at most {MAX_STEPS:.0e})")


def check_mask(data: Mapping[str, Any]) -> None:
    """What the run's mask refuses in the config (:meth:`meanfield.masks.Mask.refusal`: the
    package's causal mask, ``[positions]`` without it, ...; the initial density's use of ``s``
    is checked where it is built)."""
    refusal = mask_kind(data["model"]["mask"]).refusal(data, _attention_kinds(data["model"]))
    if refusal is not None:
        raise ConfigError(refusal)


def _attention_kinds(model: Mapping[str, Any]) -> list[Attention]:
    """The registered attention kinds the model and its layers name (unknown names and ``"none"``
    left to the layers' own check)."""
    named = [model["attention"]] + [layer.get("attention") for layer in model["layers"] or []]
    return [attention_kind(a) for a in named if a in attention_names()]


def check_model(data: Mapping[str, Any]) -> None:
    """The model's keys that go together: layers and a feed-forward block only with attention, a
    ``[model.random]`` schedule instead of written-out weights and without atoms, atoms that fit
    the mesh, a rotation about the z axis on S1, the fast field only for the kernel ``exp``."""
    m = data["model"]
    if data["nonlocal"]["method"] == "fast":
        for kind in _attention_kinds(m):
            if not kind.exponential:
                raise ConfigError(f"nonlocal.method: 'fast' expands the kernel exp; {kind.name!r} attention has "
                                  "another one (use 'direct' or 'auto')")
    if m["velocity"] == "rotation":
        for key in ("ffn", "layers"):
            if m[key] is not None:
                raise ConfigError(f"model.{key}: needs model.velocity = 'attention' (a prescribed rotation has no "
                                  "layers or feed-forward block)")
    if m["random"] is not None:
        if m["velocity"] != "attention":
            raise ConfigError("model.random: needs model.velocity = 'attention'")
        for key in ("Q", "K", "V", "heads", "ffn", "layers"):
            if m[key] is not None:
                raise ConfigError(f"model.{key}: give either model.random (drawn weights) or model.{key}, not both")
        for key in ("capture", "initial"):
            if data["atoms"][key]:
                raise ConfigError(f"atoms.{key}: atoms are not supported with model.random")
        return
    _check_atoms(data)
    if m["velocity"] == "rotation" and SPHERES[data["mesh"]["sphere"]] == 2 and m["rotation_axis"] != [0.0, 0.0, 1.0]:
        raise ConfigError("model.rotation_axis: on S1 the rotation is about the z axis")


def check_schedule_end(data: Mapping[str, Any]) -> None:
    """Refuse ``[[model.layers]]`` that end before ``time.t_final``, and a ``t_final`` beyond the last
    layer of a (valid) ``[model.random]`` schedule (also after a resume changes t_final)."""
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


def _check_atoms(data: Mapping[str, Any]) -> None:
    """Initial atoms in the mesh's dimension with masses that leave the density a share >= 0."""
    atoms, d = data["atoms"], SPHERES[data["mesh"]["sphere"]]
    for i, a in enumerate(atoms["initial"]):
        if len(a) != 1 + d:
            raise ConfigError(f"atoms.initial[{i}]: must be [mass, x_1, ..., x_{d}] on "
                              f"{data['mesh']['sphere']}, got {a!r}")
    total = sum(a[0] for a in atoms["initial"])
    if total > 1.0 + 1e-12:
        raise ConfigError(f"atoms.initial: the atoms' masses sum to {total:.6g} > 1 (the total mass is 1; the "
                          "density carries the rest)")
    if (atoms["capture"] or atoms["initial"]) and data["model"]["velocity"] != "attention":
        key = "capture" if atoms["capture"] else "initial"
        raise ConfigError(f"atoms.{key}: atoms need model.velocity = 'attention'")

"""A batch of prompts from a problem: prompt b is the particle run of the config with ``particles.seed + b``.

Prompt b's initial tokens are drawn as the single-prompt run draws them, with
``numpy.random.default_rng(particles.seed + b)`` (the deterministic samplers give every prompt
the same tokens).  Weights written out in the config, and ``[model.random]`` weights by default,
are shared by the prompts; with ``[model.random] per_prompt = true`` prompt b draws its own
weights with ``model.random.seed + b`` (one chunk's at a time), so prompt b is again the single
run with both seeds shifted by b.

Steps: ``particles.dt`` where given; else each layer's default step, ``0.25 /`` its Lipschitz
bound (:func:`~meanfield.particles.system.default_dt`), which for weights drawn per prompt is the
smallest over the prompts (drawn once beforehand for it), so a prompt then equals its single run
to the integrator's error rather than round-off; the residual update takes one step of
``model.random.eta`` per layer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..attention import attention_kind
from ..config import ConfigError
from ..layers import LayerSchedule
from ..problem import Problem
from ..random_weights import RandomLayers
from .batch import LayerArrays, LayerSource, PromptBatch, default_dts, engine_peak, shared_layers
from .positions import token_component
from .sampling import resolve_sampler


def prompt_schedule(problem: Problem, law: RandomLayers, prompt: int) -> LayerSchedule:
    """The layers prompt ``prompt`` draws for itself (``model.random.seed + prompt``)."""
    own = dataclasses.replace(law, seed=law.seed + prompt)
    model = problem.config.data["model"]
    return own.draw(problem.particles.d).schedule(own, float(model["beta"]), model["attention"])


def check_batch(problem: Problem, prompts: int, per_prompt: bool | None = None) -> bool:
    """Refuse what a batch cannot run (:class:`~meanfield.config.ConfigError` naming the field);
    returns whether the weights are drawn per prompt (``per_prompt``, else the config's)."""
    if isinstance(prompts, bool) or not isinstance(prompts, (int, np.integer)) or prompts < 1:
        raise ConfigError(f"particles.prompts: must be an integer >= 1, got {prompts!r}")
    if problem.particles.n is None:
        raise ConfigError("particles.n: the number of tokens of a prompt is not set")
    if not problem.velocity.is_attention:
        raise ConfigError("model.velocity: a batch of prompts moves with attention, not a prescribed rotation")
    attention = problem.config.data["model"]["attention"]
    if not attention_kind(attention).exponential:
        raise ConfigError(f"model.attention: a batch of prompts takes the exp kernels (softmax, unnormalized), "
                          f"got {attention!r}")
    own = problem.random is not None and problem.random.per_prompt if per_prompt is None else per_prompt
    if own and problem.random is None:
        raise ConfigError("model.random.per_prompt: weights drawn per prompt need [model.random] (random weights)")
    if own and problem.random is not None and problem.random.weights is not None:
        raise ConfigError("model.random.per_prompt: each prompt draws its own weights, so they cannot be read from "
                          "model.random.weights")
    integrator = problem.particles.integrator
    if integrator == "residual" and (problem.random is None or problem.particles.dt is not None):
        raise ConfigError("particles.integrator: 'residual' (one step per layer) needs [model.random] layers and no "
                          "particles.dt")
    if integrator not in ("rk4", "residual"):
        raise ConfigError(f"particles.integrator: a batch of prompts takes 'rk4' or 'residual', got {integrator!r}")
    return bool(own)


def prompt_batch(problem: Problem, prompts: int, per_prompt: bool | None = None) -> PromptBatch:
    """The batch of ``prompts`` prompts of a problem (module docstring); ``per_prompt`` overrides
    ``model.random.per_prompt``."""
    own = check_batch(problem, prompts, per_prompt)
    p, d = problem.particles, problem.particles.d
    n = int(p.n)  # type: ignore[arg-type]  # checked
    mask = problem.mask
    density = problem.initial(d)
    sampler = resolve_sampler(density.kind, p.sampler)
    mesh = problem.mesh.build() if sampler == "mesh" else None
    tokens = token_component(mask, n)

    def initial(chunk: range) -> np.ndarray:
        return np.stack([tokens.sample(density, n, np.random.default_rng(p.seed + b), sampler, mesh) for b in chunk])

    law = problem.random
    schedule, heads, width, own_weights = _layout(problem, own)
    layers: LayerSource = shared_layers(schedule, mask, n)
    if own:
        assert law is not None

        def drawn(chunk: range) -> list[LayerArrays]:
            schedules = [prompt_schedule(problem, law, b) for b in chunk]
            return [LayerArrays.stack([s.layers[k] for s in schedules], mask, n)
                    for k in range(len(schedule.layers))]

        layers = drawn
    if p.integrator == "residual":
        assert law is not None
        dts = [law.eta] * len(schedule.layers)
    elif p.dt is not None:
        dts = [float(p.dt)] * len(schedule.layers)
    elif own:
        assert law is not None
        dts = default_dts([prompt_schedule(problem, law, b) for b in range(prompts)])
    else:
        dts = default_dts([schedule])
    return PromptBatch(prompts, n, d, schedule.starts, dts, layers, initial, p.integrator, own_weights, heads, width)


def _layout(problem: Problem, own: bool) -> tuple[LayerSchedule, int, int, int]:
    """The shared schedule, the largest head count and feed-forward width of its layers, and the
    numbers of weights a prompt draws on its own (0: shared)."""
    d, law = problem.particles.d, problem.random
    schedule = problem.schedule(d)
    heads = max((len(layer.attention.heads) for layer in schedule.layers if layer.attention is not None), default=0)
    width = max((layer.ffn.width for layer in schedule.layers if layer.ffn is not None), default=0)
    return schedule, heads, width, law.weight_count(d) if own and law is not None else 0


def prompt_memory(problem: Problem, ranks: int = 1) -> tuple[int, int]:
    """(prompts of a chunk, bytes) at the peak of the batch of a run with ``particles.prompts`` on
    ``ranks`` ranks (:func:`~meanfield.particles.batch.engine_peak`), without drawing any prompt's
    own weights."""
    from .arrays import ArrayBackend

    p = problem.particles
    _, heads, width, own_weights = _layout(problem, check_batch(problem, p.prompts))
    backend = ArrayBackend.for_device(p.device, p.precision)
    return engine_peak(p.prompts, int(p.n), p.d, backend, ranks, None, heads, width,  # type: ignore[arg-type]
                       own_weights)


def describe(batch: PromptBatch, problem: Problem) -> dict[str, Any]:
    """Facts of a batch for metadata: prompts, tokens, dimension, the steps' sizes, the weights' sharing."""
    return {"prompts": batch.prompts, "n": batch.n, "d": batch.d, "dts": batch.dts, "integrator": batch.integrator,
            "weights": "per prompt" if batch.own_weights else "shared", "mask": problem.mask.name,
            "seed": problem.particles.seed}

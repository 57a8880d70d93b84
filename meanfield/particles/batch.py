"""Batches of prompts: B independent systems of n tokens in one state of shape (B, n, d).

The model is the token system of :mod:`meanfield.particles` (``MODEL.md``): SA or USA (the 1/n
of ``MODEL.md``), heads with their own Q, K, V and weight, layer schedules and the feed-forward
block, the causal mask with positional decay (ALiBi) and its normalisation
(:meth:`meanfield.masks.Mask.token_arrays`), random weights (``[model.random]``), RK4 or the residual
update.  Each prompt moves alone: prompt b of a batch is the single-prompt run of the same
config with ``particles.seed + b`` (and, with random weights drawn per prompt,
``model.random.seed + b``), to round-off.

Numerics
    The velocity of a layer is computed for every prompt and head at once with matrix
    products on the (B, H, n, n) logits ``beta <x_i, A_h x_j>`` (``A_h = Q_h^T K_h``; a head
    with Q = K = I or V = I skips that product): the causal mask and ALiBi add ``-inf`` and
    ``-lambda (s_i - s_j)`` to the logits, each row's largest logit is subtracted before the
    exponential (a stable softmax: nothing overflows under SA; under USA the row's factor
    ``e^max`` is multiplied back after the sum), and ``P_x v = v - <x, v> x`` projects the
    heads' weighted sum plus the feed-forward block.  One code path serves numpy and JAX
    (:mod:`meanfield.particles.arrays`): under JAX the steps between two landing times are one
    compiled ``fori_loop``.

Steps
    The times the caller asks for and the layer boundaries cut ``[0, t_final]`` into
    intervals; each interval takes equal steps no longer than its layer's ``dt``
    (:class:`~meanfield.particles.integrator.EqualSteps`, the single-prompt run's plan), each
    RK4 step (or residual update) renormalised onto the sphere.

Memory
    Prompts are worked through in chunks of :func:`chunk_size` prompts: a chunk holds about
    :func:`bytes_per_prompt` bytes per prompt (the state, the four RK4 slopes and a stage, the
    heads' products and their (n, n) logits and exponentials, the feed-forward block's hidden
    layer, and per-prompt weights where they are drawn per prompt), so the engine's peak is
    ``chunk x bytes_per_prompt`` plus the tokens of one chunk on the host; the chunk is the
    largest that fits in ``memory`` bytes (:data:`DEFAULT_MEMORY` per array library), at least
    one prompt.  Results do not depend on the chunk (every prompt moves alone, and the steps
    are fixed before the first chunk).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..attention import attention_kind
from ..layers import Layer, LayerSchedule
from ..masks import Mask
from ..times import time_tol
from .arrays import ArrayBackend
from .integrator import EqualSteps, rk4_step
from .system import default_dt

#: Bytes a chunk of prompts may hold, per array library.  numpy: the arrays of a chunk stay in the
#: processor's cache (at n = 32, d = 128: 20 prompts, 1.5 times faster than chunks of 150 or more,
#: benchmarks/bench_tokens_batched.py); JAX: large batches for a GPU.
DEFAULT_MEMORY: dict[str, int] = {"numpy": 8 << 20, "jax": 2 << 30}
#: The integrators of a batch: ``particles.integrator`` values it takes.
BATCH_INTEGRATORS: tuple[str, ...] = ("rk4", "residual")


@dataclass(frozen=True)
class Structure:
    """What a layer's velocity computes, fixed when it is compiled (hashable).

    Attributes
    ----------
    attention
        ``"softmax"``, ``"unnormalized"`` or ``None`` (no attention).
    heads
        Heads H.
    interaction, value
        Whether the heads have matrices ``A = Q^T K`` and ``V`` (False: every head has the identity).
    activation
        The feed-forward block's activation, ``None`` without a block.
    masked
        Whether the logits carry the mask's bias (:meth:`meanfield.masks.Mask.token_arrays`: causal,
        with decay).
    """

    attention: str | None
    heads: int
    interaction: bool
    value: bool
    activation: str | None
    masked: bool


def _stacked(items: Sequence[np.ndarray]) -> np.ndarray:
    return np.ascontiguousarray(np.stack(items))


@dataclass
class LayerArrays:
    """One layer of every prompt of a chunk as arrays: leading axis 1 (shared) or the chunk's prompts.

    ``arrays``: ``A`` and ``V`` (P, H, d, d) where :class:`Structure` has them, ``w`` (H,) the
    heads' weights, ``beta`` (), the mask's ``bias`` and ``scale``; the block's ``W`` (P, d, m),
    ``Af`` (P, m, d), ``b`` (P, 1, m).
    """

    structure: Structure
    arrays: dict[str, np.ndarray]

    @classmethod
    def stack(cls, layers: Sequence[Layer], mask: Mask, n: int) -> LayerArrays:
        """The same layer of each prompt (one layer: shared by the prompts)."""
        first = layers[0]
        model, ffn = first.attention, first.ffn
        arrays: dict[str, np.ndarray] = {}
        interaction = value = False
        heads = 0
        if model is not None:
            heads = len(model.heads)
            eye = np.eye(model.d)
            A = [np.stack([h.interaction for h in layer.attention.heads]) for layer in layers]  # type: ignore[union-attr]
            V = [np.stack([h.V for h in layer.attention.heads]) for layer in layers]  # type: ignore[union-attr]
            interaction = not all(np.array_equal(a, eye) for stack in A for a in stack)
            value = not all(np.array_equal(v, eye) for stack in V for v in stack)
            if interaction:
                arrays["A"] = _stacked(A)
            if value:
                arrays["V"] = _stacked(V)
            arrays["w"] = np.array([h.weight for h in model.heads])
            arrays["beta"] = np.array(model.beta)
            arrays.update(mask.token_arrays(n, model.kind.normalised))
        if ffn is not None:
            blocks = [layer.ffn for layer in layers]
            arrays["W"] = _stacked([f.W for f in blocks])  # type: ignore[union-attr]
            arrays["Af"] = _stacked([f.A for f in blocks])  # type: ignore[union-attr]
            arrays["b"] = _stacked([f.b[None, :] for f in blocks])  # type: ignore[union-attr]
        structure = Structure(None if model is None else model.attention, heads, interaction, value,
                              None if ffn is None else ffn.activation, "bias" in arrays)
        return cls(structure, arrays)


def _activation(xp: Any, name: str) -> Callable[[Any], Any]:
    if name == "relu":
        return lambda z: xp.maximum(z, 0.0)
    if name == "tanh":
        return xp.tanh
    if name == "gelu":
        if xp is np:
            from scipy.special import ndtr
        else:
            from jax.scipy.special import ndtr
        return lambda z: z * ndtr(z)
    return lambda z: z


def velocity(xp: Any, structure: Structure, p: dict[str, Any], x: Any) -> Any:
    """The layer's velocity of every token of every prompt, x of shape (B, n, d) (module docstring).

    The (B, H, n, n) and (B, n, d) arrays made here are updated in place (augmented assignments:
    numpy writes into the array, JAX binds the new one), so numpy allocates and reads each once
    less per operation; x and the parameters are never written.
    """
    total = None
    if structure.attention is not None:
        single = structure.heads == 1  # then no heads' axis: (B, n, d) and (B, n, n) arrays
        xa = x if single else x[:, None]  # (B, 1, n, d): every head
        head = (lambda a: a[:, 0]) if single else (lambda a: a)
        left = xa @ head(p["A"]) if structure.interaction else xa  # rows x_i^T A
        logits = left @ xp.swapaxes(xa, -1, -2)  # (B, [H,] n, n)
        logits *= p["beta"]
        if structure.masked:
            logits += p["bias"]
        top = xp.max(logits, axis=-1, keepdims=True)
        logits -= top
        E = xp.exp(logits)
        # the heads' weights and the softmax's division (or USA's factor) scale E's rows: (B, [H,] n, 1)
        # factors on n x n numbers, fewer than the n x d of the sums when n <= d
        w = p["w"][:, None, None]
        E *= w / xp.sum(E, axis=-1, keepdims=True) if attention_kind(structure.attention).normalised \
            else w * xp.exp(top) * p["scale"]
        values = xa @ xp.swapaxes(head(p["V"]), -1, -2) if structure.value else xa  # rows (V x_j)^T
        N = E @ values
        total = N if single else xp.sum(N, axis=1)
    if structure.activation is not None:
        block = _activation(xp, structure.activation)(x @ xp.swapaxes(p["Af"], -1, -2) + p["b"]) \
            @ xp.swapaxes(p["W"], -1, -2)
        if total is None:
            total = block
        else:
            total += block
    if total is None:
        return xp.zeros_like(x)
    total -= xp.vecdot(x, total)[..., None] * x
    return total


def _steps(xp: Any, repeat: Callable[..., Any], structure: Structure, integrator: str, p: dict[str, Any], x: Any,
           drift: Any, count: Any, h: Any) -> tuple[Any, Any]:
    """``count`` steps of size h from x, each renormalised; the largest drift off the sphere."""
    field_ = partial(velocity, xp, structure, p)

    def body(carry: tuple[Any, Any]) -> tuple[Any, Any]:
        y, worst = carry
        y = y + h * field_(y) if integrator == "residual" else rk4_step(field_, y, h)
        norms = xp.sqrt(xp.vecdot(y, y))[..., None]
        y /= norms  # y is the step's new array
        return y, xp.maximum(worst, xp.max(xp.abs(1.0 - norms)))

    return repeat(count, body, (x, drift))


def bytes_per_prompt(n: int, d: int, heads: int = 1, width: int = 0, itemsize: int = 8,
                     weights: int = 0) -> int:
    """The memory one prompt of a chunk holds at the peak of an RK4 step (module docstring):
    ``(8 + 4 H) n d + 3 H n^2 + 2 n m`` numbers, plus ``weights`` numbers of its own weights."""
    return itemsize * ((8 + 4 * heads) * n * d + 3 * heads * n * n + 2 * n * width + weights)


def chunk_size(prompts: int, per_prompt: int, memory: int) -> int:
    """The prompts of a chunk: as many as fit in ``memory`` bytes at ``per_prompt`` bytes each, 1 to ``prompts``."""
    return max(1, min(prompts, memory // max(per_prompt, 1)))


#: (prompts of a chunk, layers of the chunk): the layers in schedule order.
LayerSource = Callable[[range], list[LayerArrays]]
#: (prompts of a chunk) -> their initial tokens (P, n, d), numpy.
InitialSource = Callable[[range], np.ndarray]
#: Called at every asked time with (prompts of the chunk, index of the time, tokens as an engine array).
Observer = Callable[[range, int, Any], None]


@dataclass
class PromptBatch:
    """B prompts of n tokens on S^{d-1}: their layers, steps and initial tokens.

    Attributes
    ----------
    prompts, n, d
        The batch's size.
    starts
        The layers' start times (``starts[0] = 0``).
    dts
        Each layer's largest step (one step of length eta per layer with the residual update).
    layers
        The layers of a chunk of prompts (shared ones have leading axis 1).
    initial
        The initial tokens of a chunk of prompts.
    integrator
        ``"rk4"`` or ``"residual"``.
    own_weights
        Numbers of weights each prompt holds on its own (0: shared), for the chunk's memory.
    heads, width
        Largest head count and feed-forward width of the layers, for the chunk's memory.
    """

    prompts: int
    n: int
    d: int
    starts: tuple[float, ...]
    dts: list[float]
    layers: LayerSource
    initial: InitialSource
    integrator: str = "rk4"
    own_weights: int = 0
    heads: int = 1
    width: int = 0

    def intervals(self, times: Sequence[float]) -> list[tuple[float, float, int]]:
        """``(t0, t1, layer)`` from 0 to the last time, cut at the times and the layer boundaries."""
        return intervals(self.starts, times)

    def chunk(self, backend: ArrayBackend, memory: int | None = None) -> int:
        """The prompts of a chunk (:func:`chunk_size`) for ``memory`` bytes (default :data:`DEFAULT_MEMORY`)."""
        return self.peak(backend, 1, memory)[0]

    def peak(self, backend: ArrayBackend, ranks: int = 1, memory: int | None = None) -> tuple[int, int]:
        """(prompts of a chunk, bytes) at the busiest rank's peak (:func:`engine_peak`)."""
        return engine_peak(self.prompts, self.n, self.d, backend, ranks, memory, self.heads, self.width,
                           self.own_weights)


def engine_peak(prompts: int, n: int, d: int, backend: ArrayBackend, ranks: int = 1, memory: int | None = None,
                heads: int = 1, width: int = 0, own_weights: int = 0) -> tuple[int, int]:
    """(prompts of a chunk, bytes) at the busiest rank's peak when ``ranks`` ranks share ``prompts``
    prompts: a chunk at the peak of a step (:func:`bytes_per_prompt`), the rank's tokens between
    outputs, and on rank 0 an output's tokens of every prompt gathered in float64."""
    per = bytes_per_prompt(n, d, heads, width, backend.itemsize, own_weights)
    busiest = -(-prompts // ranks)
    chunk = min(chunk_size(prompts, per, DEFAULT_MEMORY[backend.library] if memory is None else memory), busiest)
    return chunk, chunk * per + busiest * n * d * backend.itemsize + prompts * n * d * 8


def intervals(starts: Sequence[float], times: Sequence[float]) -> list[tuple[float, float, int]]:
    """``(t0, t1, layer)`` from 0 to the last of ``times``, cut at the times and at the layers'
    ``starts`` (``starts[0] = 0``)."""
    end = float(times[-1])
    cuts = sorted({0.0, *map(float, times), *(b for b in starts[1:] if b < end - time_tol(end))})
    layer = lambda t: sum(b <= t + time_tol(b) for b in starts[1:])
    return [(a, b, layer(a)) for a, b in zip(cuts[:-1], cuts[1:]) if b - a > time_tol(b)]


def step_count(starts: Sequence[float], dts: Sequence[float], times: Sequence[float]) -> int:
    """The equal steps (:class:`~meanfield.particles.integrator.EqualSteps`) of each prompt from 0
    to the last of ``times``, the layers (from ``starts``) stepping at most ``dts``."""
    return sum(EqualSteps.over(a, b, dts[k]).count for a, b, k in intervals(starts, times))


@dataclass
class BatchReport:
    """What :func:`run_batch` did: steps per prompt, chunks, the chunk's prompts and the largest drift."""

    steps: int
    chunks: int
    chunk: int
    max_drift: float
    backend: str
    timings: dict[str, float] = field(default_factory=dict)


class CompiledSteps:
    """The compiled step loops of a backend, one per (structure, integrator)."""

    def __init__(self, backend: ArrayBackend) -> None:
        self.backend = backend
        self.loops: dict[tuple[Structure, str], Callable[..., Any]] = {}

    def __call__(self, structure: Structure, integrator: str) -> Callable[..., Any]:
        key = (structure, integrator)
        if key not in self.loops:
            b = self.backend
            self.loops[key] = b.compile(partial(_steps, b.xp, b.repeat, structure, integrator))
        return self.loops[key]


def run_batch(batch: PromptBatch, times: Sequence[float], observe: Observer, backend: ArrayBackend | None = None,
              memory: int | None = None) -> BatchReport:
    """Move every prompt from t = 0 through ``times`` (increasing, >= 0), calling ``observe`` at each.

    Parameters
    ----------
    batch
        The prompts.
    times
        Times at which ``observe`` sees the tokens (0 allowed: the initial tokens).
    observe
        ``observe(prompts, k, x)``: the tokens x (engine array, (P, n, d)) of a chunk's prompts at ``times[k]``.
    backend
        Array library, device and precision (default numpy float64).
    memory
        Bytes a chunk may hold (default :data:`DEFAULT_MEMORY`).
    """
    import time

    backend = backend or ArrayBackend.make()
    if batch.integrator not in BATCH_INTEGRATORS:
        raise ValueError(f"particles.integrator: a batch of prompts takes one of {list(BATCH_INTEGRATORS)}, "
                         f"got {batch.integrator!r}")
    times = [float(t) for t in times]
    if any(b <= a for a, b in zip(times[:-1], times[1:])) or times[0] < 0:
        raise ValueError(f"times: must be increasing and >= 0, got {times}")
    intervals = batch.intervals(times)
    plans = [EqualSteps.over(a, b, batch.dts[k]) for a, b, k in intervals]
    if batch.integrator == "residual" and any(abs(p.h - batch.dts[k]) > time_tol(p.t1)
                                              for p, (_, _, k) in zip(plans, intervals)):
        raise ValueError(f"times: the 'residual' integrator takes one step per layer, so the times must be multiples "
                         f"of model.random.eta = {batch.dts[0]:g}")
    at = {b: i for i, b in enumerate(times)}
    chunk = batch.chunk(backend, memory)
    compiled = CompiledSteps(backend)
    drift, started = 0.0, time.perf_counter()
    with backend.context():
        for first in range(0, batch.prompts, chunk):
            prompts = range(first, min(first + chunk, batch.prompts))
            layers = batch.layers(prompts)
            params = [{k: backend.asarray(v) for k, v in layer.arrays.items()} for layer in layers]
            x = backend.asarray(batch.initial(prompts))
            worst = backend.asarray(0.0)
            if times[0] == 0.0:
                observe(prompts, 0, x)
            for (_, b, k), plan in zip(intervals, plans):
                loop = compiled(layers[k].structure, batch.integrator)
                x, worst = loop(params[k], x, worst, plan.count, backend.asarray(plan.h))
                if b in at:
                    observe(prompts, at[b], x)
            drift = max(drift, float(worst))
    return BatchReport(sum(p.count for p in plans), -(-batch.prompts // chunk), chunk, drift, backend.describe(),
                       {"total": time.perf_counter() - started})


def shared_layers(schedule: LayerSchedule, mask: Mask, n: int) -> LayerSource:
    """The layers of a schedule shared by every prompt."""
    stacked = [LayerArrays.stack([layer], mask, n) for layer in schedule.layers]
    return lambda prompts: stacked


def default_dts(schedules: Sequence[LayerSchedule]) -> list[float]:
    """Each layer's default RK4 step, the smallest over the schedules (the prompts' own)."""
    return [min(default_dt(s.layers[k]) for s in schedules) for k in range(len(schedules[0].layers))]

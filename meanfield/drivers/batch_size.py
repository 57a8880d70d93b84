"""What a batch of prompts would cost (``meanfield check`` of a config with ``[particles] prompts``).

The batched engine (:mod:`meanfield.particles.batch`) moves a rank's prompts chunk by chunk; a
chunk holds :func:`~meanfield.particles.batch.bytes_per_prompt` bytes per prompt at the peak of
an RK4 step, and the engine holds every token of the rank between outputs.  Rank 0 gathers all
B prompts at each output (the snapshot, and run.nc's arrays).  The wall time is one chunk's
step measured here, times the steps and the chunks of the busiest rank.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..memory import format_bytes
from ..problem import Problem
from ..wording import counted


@dataclass(frozen=True)
class BatchSize:
    """A batch's size: prompts, chunks, steps, memory and a measured step.

    Attributes
    ----------
    prompts, n, d
        The batch.
    chunk
        Prompts of a chunk; ``chunks``: the busiest rank's chunks.
    steps
        Steps of each prompt from 0 to the last output.
    peak
        Bytes of the busiest rank's engine (a chunk at its peak, its prompts' tokens), plus on
        rank 0 the gathered tokens of an output.
    per_output
        Bytes of one output on disk (snapshot and run.nc).
    chunk_step
        Seconds of one step of one chunk, measured.
    backend
        The array library, device and precision.
    """

    prompts: int
    n: int
    d: int
    chunk: int
    chunks: int
    steps: int
    peak: int
    per_output: int
    chunk_step: float
    backend: str

    @classmethod
    def measure(cls, problem: Problem, ranks: int = 1) -> BatchSize:
        """The size of ``problem``'s batch on ``ranks`` ranks, one chunk's step measured (a few steps
        of the first chunk here)."""
        from ..particles.arrays import ArrayBackend
        from ..particles.batch import CompiledSteps, step_count
        from ..particles.prompts import prompt_batch

        p = problem.particles
        backend = ArrayBackend.for_device(p.device, p.precision)
        batch = prompt_batch(problem, p.prompts)
        busiest = -(-p.prompts // ranks)
        chunk, peak = batch.peak(backend, ranks)
        steps = step_count(batch.starts, batch.dts, list(problem.time.output_times))
        per_output = output_bytes(p.prompts, batch.n, batch.d)
        compiled = CompiledSteps(backend)
        prompts = range(chunk)
        layer = batch.layers(prompts)[0]
        with backend.context():
            params = {k: backend.asarray(v) for k, v in layer.arrays.items()}
            x = backend.asarray(batch.initial(prompts))
            loop = compiled(layer.structure, batch.integrator)
            h, seconds = backend.asarray(batch.dts[0]), []
            for _ in range(3):  # the first compiles (JAX) or warms the caches
                tic = time.perf_counter()
                x, worst = loop(params, x, backend.asarray(0.0), 1, h)
                float(worst)
                seconds.append(time.perf_counter() - tic)
        return cls(p.prompts, batch.n, batch.d, chunk, -(-busiest // chunk), steps, peak, per_output,
                   float(np.min(seconds[1:])), backend.describe())

    def lines(self, outputs: int) -> list[str]:
        """The report's lines (``meanfield check``)."""
        wall = self.steps * self.chunks * self.chunk_step
        return [f"prompts:     {self.prompts} prompts of {self.n} tokens on S^{self.d - 1} (meanfield particles; "
                f"prompt b is the run with particles.seed + b), {self.backend}",
                f"  engine:    chunks of {counted(self.chunk, 'prompt')}, {counted(self.chunks, 'chunk')} on the "
                f"busiest rank, {self.steps} steps per prompt; one chunk's step {self.chunk_step * 1e3:.3g} ms here "
                f"-> ~{wall:.3g} s of steps",
                f"  memory:    ~{format_bytes(self.peak)} on rank 0 (a chunk at its peak, the rank's tokens, an "
                f"output's gathered tokens)",
                f"  outputs:   ~{format_bytes(self.per_output)} per output (tokens in the snapshot and run.nc, "
                f"moments and scalars per prompt), ~{format_bytes(self.per_output * outputs)} in all"]


def output_bytes(prompts: int, n: int, d: int) -> int:
    """Bytes one output of a particle run of ``prompts`` prompts of n tokens in R^d writes: the
    tokens twice (the snapshot and run.nc), each prompt's mean vector, second moments and scalars
    (8-byte values)."""
    return 8 * prompts * (2 * n * d + d + d * d + 10)

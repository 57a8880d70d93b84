"""The batched token engine on the CPU: token-steps per second, the share of this machine's dgemm, and
the ratio to a plain numpy batch of the same RK4, measured in the same process.

SA, Q = K = V = I, beta = 1, B prompts of n tokens uniform on S^{d-1}, ``--steps`` RK4 steps of
dt = 0.01 (4 velocity evaluations each), one thread.  A step does ``16 B n^2 d`` flops in its matrix
products (per evaluation: the logits ``x x^T`` and the sums ``E x``, ``2 B n^2 d`` each); the
engine's flop rate on them is compared with

* ``dgemm``: one square matrix product of about the same flops (numpy's BLAS at its best);
* ``batched matmul``: the step's own products alone (``np.matmul`` on the (B, n, d) stacks), the
  arithmetic of the step without the exponentials, sums and projections;
* ``plain numpy``: the 20-line batch a user writes (``einsum`` logits and sums, softmax with the
  row maximum, RK4 with renormalisation).

Times are the best of ``--repeats`` interleaved rounds, in this process's CPU time (steady on a
shared machine for a one-thread process).  With JAX installed the engine's JAX path on the CPU is
timed too (compiled once before timing).

    python benchmarks/bench_tokens_batched.py [--prompts 1024] [--n 32] [--d 128] [--steps 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import interleaved_best, setup_process, table


def plain_batch(x: np.ndarray, beta: float, dt: float, steps: int) -> np.ndarray:
    """The plain numpy batch of the same RK4 (what a user writes in 20 lines)."""

    def velocity(y: np.ndarray) -> np.ndarray:
        logits = beta * np.einsum("bid,bjd->bij", y, y)
        weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        v = np.einsum("bij,bjd->bid", weights, y)
        return v - np.sum(y * v, axis=-1, keepdims=True) * y

    for _ in range(steps):
        k1 = velocity(x)
        k2 = velocity(x + 0.5 * dt * k1)
        k3 = velocity(x + 0.5 * dt * k2)
        k4 = velocity(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prompts", type=int, default=1024)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--memory", type=float, default=None, help="MiB a chunk may hold (default: the engine's)")
    args = p.parse_args()
    setup_process()

    from meanfield.layers import LayerSchedule
    from meanfield.masks import NoMask
    from meanfield.particles.arrays import ArrayBackend
    from meanfield.particles.batch import PromptBatch, run_batch, shared_layers
    from meanfield.particles.sampling import uniform_sphere

    B, n, d, S, dt, beta = args.prompts, args.n, args.d, args.steps, 0.01, 1.0
    x0 = np.stack([uniform_sphere(np.random.default_rng(b), n, d) for b in range(B)])
    schedule = LayerSchedule.build(d, {"beta": beta})
    batch = PromptBatch(B, n, d, (0.0,), [dt], shared_layers(schedule, NoMask(), n),
                        lambda chunk: x0[chunk.start:chunk.stop])
    memory = None if args.memory is None else int(args.memory * 2**20)
    final: dict[str, np.ndarray] = {}

    def engine(backend: ArrayBackend) -> None:
        def keep(chunk, k, x, name=backend.library):
            final.setdefault(name, np.empty_like(x0))[chunk.start:chunk.stop] = np.asarray(x)

        run_batch(batch, [S * dt], keep, backend, memory)

    flops_step = 16.0 * B * n * n * d
    side = int(round((flops_step * S / 2.0) ** (1.0 / 3.0)))
    a, b = np.random.default_rng(1).standard_normal((2, side, side))
    xT = np.ascontiguousarray(np.swapaxes(x0, -1, -2))
    E = np.random.default_rng(2).random((B, n, n))
    calls = {
        "engine (numpy)": lambda: engine(ArrayBackend.make("numpy")),
        "plain numpy": lambda: final.__setitem__("plain", plain_batch(x0.copy(), beta, dt, S)),
        "batched matmul": lambda: [(np.matmul(x0, xT), np.matmul(E, x0)) for _ in range(4 * S)],
        "dgemm": lambda: a @ b,
    }
    flops = {name: flops_step * S for name in calls}
    flops["dgemm"] = 2.0 * side**3
    try:
        jax_backend = ArrayBackend.make("jax", "cpu")
        engine(jax_backend)  # compile before timing
        calls["engine (jax, cpu)"] = lambda: engine(jax_backend)
        flops["engine (jax, cpu)"] = flops_step * S
    except ValueError as exc:
        print(f"(no JAX path: {exc})")
    tic = time.perf_counter()
    best = interleaved_best(calls, args.repeats, clock=time.process_time)
    chunk = batch.chunk(ArrayBackend.make("numpy"), memory)
    rate = {name: flops[name] / best[name] for name in calls}
    rows = []
    for name in calls:
        steps = B * n * S / best[name] if name not in ("dgemm",) else float("nan")
        rows.append([name, f"{best[name]:.3f}", f"{steps:.3g}" if np.isfinite(steps) else "-",
                     f"{rate[name] / 1e9:.2f}", f"{rate[name] / rate['dgemm']:.2f}",
                     f"{best['plain numpy'] / best[name]:.2f}" if name.startswith("engine") else "-"])
    print(f"B = {B}, n = {n}, d = {d}, {S} RK4 steps, numpy chunk {chunk} prompts; "
          f"{time.perf_counter() - tic:.1f} s wall in all")
    print(table(["", "CPU s", "token-steps/s", "GFlop/s", "of dgemm", "x plain numpy"], rows))
    for name, tokens in final.items():
        if name != "numpy":
            print(f"largest difference to the numpy engine: {name} {np.abs(tokens - final['numpy']).max():.2e}")


if __name__ == "__main__":
    main()

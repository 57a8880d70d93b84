"""Particle RK4 throughput: steps per second against n, d = 3, softmax, beta = 1.

    python benchmarks/bench_particles.py [--quick]          # 1 rank
    mpirun -n 2 python benchmarks/bench_particles.py        # tokens split over 2 ranks

Times whole RK4 steps (4 field evaluations and the renormalisation) of the particle
solver with the direct evaluator for n = 1e3 .. 1e5 and, when ``make_evaluator(...,
method="fast")`` works, the fast evaluator up to 1e6.  ``--quick`` stops at 1e4 (direct) and
1e5 (fast).  Prints a table on rank 0; not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

from meanfield.model import AttentionModel
from meanfield.nonlocal_field import make_evaluator
from meanfield.particles import ParticleSystem, attention_field, rk4_step, token_block
from meanfield.particles.sampling import uniform_sphere


def steps_per_second(method: str, n: int, comm, min_time: float = 1.0) -> float:
    """RK4 steps per second for n uniform tokens (at least one step, repeated for ``min_time``)."""
    model = AttentionModel(d=3, beta=1.0)
    block = token_block(n, comm.rank, comm.size)
    x = uniform_sphere(np.random.default_rng(0), n, 3)[block]
    system = ParticleSystem(attention_field(make_evaluator(model, comm, method, 1e-10)), np.full(x.shape[0], 1 / n))
    rk4_step(system.velocity, x, 0.01)  # warm-up (fast: basis set-up)
    comm.barrier()
    steps, tic = 0, time.perf_counter()
    while True:
        x = rk4_step(system.velocity, x, 0.01)
        x /= np.linalg.norm(x, axis=1)[:, None]
        steps += 1
        elapsed = comm.allreduce(time.perf_counter() - tic, op=MPI.MAX)
        if elapsed >= min_time:
            return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--direct-max", type=int, default=100_000,
                        help="largest n for the direct evaluator (1e5 takes ~10 min on one core)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    direct = [n for n in [1_000, 3_000, 10_000, 30_000, 100_000] if n <= args.direct_max]
    plans = {"direct": direct[:3] if args.quick else direct,
             "fast": [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])}
    if comm.rank == 0:
        print(f"RK4 steps/s, d = 3, softmax, beta = 1, {comm.size} rank(s)")
        print(f"{'method':>8s} {'n':>9s} {'steps/s':>10s} {'s/step':>10s} {'ns/pair/eval':>13s}")
    for method, ns in plans.items():
        for n in ns:
            try:
                rate = steps_per_second(method, n, comm)
            except (NotImplementedError, ImportError, ValueError) as exc:
                if comm.rank == 0:
                    print(f"{method:>8s} {n:>9d}  skipped: {exc}")
                break
            if comm.rank == 0:
                pair = 1e9 / (rate * 4 * float(n) ** 2)
                print(f"{method:>8s} {n:>9d} {rate:>10.3g} {1 / rate:>10.3g} {pair:>13.3g}", flush=True)


if __name__ == "__main__":
    main()

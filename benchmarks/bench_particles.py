"""Particle RK4 step time and peak memory per token count: current code against the
baseline (the field before the transforms, loaded from git) and the direct sum, measured in the same run.

d = 3, softmax, beta = 1 (the particle solver's default case), n tokens uniform on S^2.  Each
(n, implementation) runs in a fresh process (its own peak memory): one untimed warm-up step,
then the best of ``--steps`` RK4 steps (4 field evaluations each, tokens not fixed).  The
direct sum is timed for n up to ``--direct-max`` (its time grows like n^2).

    python benchmarks/bench_particles.py [--counts 1e4,1e5,1e6] [--tol 1e-6] [--old-tol 1e-10] [--rounds 2]
    mpirun -n 2 python benchmarks/bench_particles.py --worker 100000 new   # one row, 2 ranks
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from common import peak_rss_mb, run_json, setup_process, table


def worker(n: int, impl: str, args) -> None:
    setup_process(baseline=impl == "old")
    from mpi4py import MPI

    from meanfield.model import AttentionModel
    from meanfield.nonlocal_field import make_evaluator
    from meanfield.particles import ParticleSystem, attention_field, rk4_step, token_block
    from meanfield.particles.sampling import uniform_sphere

    comm = MPI.COMM_WORLD
    model = AttentionModel(d=3, beta=1.0)
    if impl == "old":
        from baseline import load_baseline

        evaluator = load_baseline().make_evaluator(model, comm, "fast", args.old_tol)
    else:
        evaluator = make_evaluator(model, comm, impl, args.tol)
    block = token_block(n, comm.rank, comm.size)
    x = uniform_sphere(np.random.default_rng(0), n, 3)[block]
    system = ParticleSystem(attention_field(evaluator), np.full(x.shape[0], 1.0 / n))
    x = rk4_step(system.velocity, x, 0.01)
    best = float("inf")
    for _ in range(args.steps):
        comm.barrier()
        tic = time.perf_counter()
        x = rk4_step(system.velocity, x, 0.01)
        x /= np.linalg.norm(x, axis=1)[:, None]
        best = min(best, comm.allreduce(time.perf_counter() - tic, op=MPI.MAX))
    peak = comm.allreduce(peak_rss_mb(), op=MPI.MAX)
    if comm.rank == 0:
        print(json.dumps({"n": n, "ranks": comm.size, "step": best, "peak_rss": peak}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--counts", default="1e4,1e5,1e6")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--old-tol", type=float, default=1e-10)
    p.add_argument("--direct-max", type=float, default=1e4)
    p.add_argument("--rounds", type=int, default=2, help="fresh processes per (n, implementation), alternating; "
                   "the fastest counts")
    p.add_argument("--worker", nargs=2, metavar=("N", "IMPL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(int(float(args.worker[0])), args.worker[1], args)
        return
    base = [__file__, "--steps", str(args.steps), "--tol", str(args.tol), "--old-tol", str(args.old_tol)]
    header = ["n", "new s/step", "old s/step", "old/new", "direct s/step", "direct/new", "new peak MiB",
              "old peak MiB"]
    print(f"RK4 steps, d = 3, softmax, beta = 1, one rank and thread; new tol {args.tol:g}, old tol {args.old_tol:g}")
    rows = []
    for n in (int(float(c)) for c in args.counts.split(",")):
        impls = ("fast", "old", "direct") if n <= args.direct_max else ("fast", "old")
        runs: dict[str, list[dict]] = {impl: [] for impl in impls}
        for _ in range(args.rounds):
            for impl in impls:
                runs[impl].append(run_json(base + ["--worker", str(n), impl]))
        new, old = (min(runs[i], key=lambda r: r["step"]) for i in ("fast", "old"))
        direct = min(runs["direct"], key=lambda r: r["step"]) if "direct" in runs else None
        d_step = direct["step"] if direct else float("nan")
        rows.append([f"{n:.0e}", new["step"], old["step"], old["step"] / new["step"], d_step,
                     d_step / new["step"], new["peak_rss"], old["peak_rss"]])
        print(table(header, rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(header, rows))


if __name__ == "__main__":
    main()

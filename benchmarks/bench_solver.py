"""PDE solver throughput: cell-steps per second and the time split of a step.

For S^2 icosphere levels 3..6 and S^1 with 1k..64k cells, on 1 and 2 MPI ranks, with the
direct and the automatic nonlocal evaluator, runs a few SSP-RK3 steps of the default
clustering case and prints, per row: cells, ranks, method, seconds per step, cell-steps per
second, and the shares of the step spent in the nonlocal field (velocity evaluation), in
the transport (fluxes, ghost exchange, RK combinations) and in one output (observables,
snapshot and XDMF).  Direct rows whose estimated cost exceeds --budget seconds are skipped
(the estimate is printed).

    python benchmarks/bench_solver.py [--quick] [--ranks 1,2] [--steps 3] [--budget 120]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DIRECT_NS_PER_PAIR = 7.0  # measured here: numpy's float64 exp without AVX-512


def cases(quick: bool) -> list[tuple[str, int, int]]:
    """(sphere, resolution, cells)."""
    s2 = [(L, 20 * 4**L) for L in ((3, 4) if quick else (3, 4, 5, 6))]
    s1 = [1000, 4000] if quick else [1000, 4000, 16000, 64000]
    return [("S2", L, n) for L, n in s2] + [("S1", n, n) for n in s1]


def worker(sphere: str, resolution: int, method: str, steps: int) -> None:
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.io import DensityWriter, RunDirectory
    from meanfield.solver import _write_output, build_simulation

    comm = MPI.COMM_WORLD
    cfg = load_config(None, [f"mesh.sphere={sphere!r}".replace("'", '"'), f"mesh.resolution={resolution}",
                             f"nonlocal.method=\"{method}\"", "nonlocal.tol=1e-8"]
                      + (["initial.centers=[[1.0, 0.0], [0.0, 1.0], [-1.0, -0.2]]"] if sphere == "S1" else []))
    sim = build_simulation(cfg, comm)
    state, t = sim.state, 0.0
    state, dt = sim.stepper.step(state, t, 1.0)  # warm-up: JIT-free, but caches and first evaluation
    v0 = sim.velocity.seconds
    comm.barrier()
    tic = time.perf_counter()
    for _ in range(steps):
        state, dt = sim.stepper.step(state, t, 1.0)
        t += dt
    comm.barrier()
    step_time = (time.perf_counter() - tic) / steps
    velocity = (sim.velocity.seconds - v0) / steps
    with tempfile.TemporaryDirectory() as tmp:
        tmp = comm.bcast(tmp, root=0)
        rundir = RunDirectory(comm, Path(tmp) / "bench")
        rundir.create(cfg.to_toml())
        writer = DensityWriter(comm, rundir.path, sim.scheme.output_function(state))
        comm.barrier()
        tic = time.perf_counter()
        _write_output(sim, rundir, writer, state, 0, t, tic)
        comm.barrier()
        output = time.perf_counter() - tic
        writer.close()
    if comm.rank == 0:
        print(json.dumps({"sphere": sphere, "cells": sim.num_cells, "ranks": comm.size, "method": method,
                          "step": step_time, "velocity": velocity, "output": output,
                          "evaluator": sim.evaluator.diagnostics().get("method")}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--budget", type=float, default=120.0, help="skip direct rows estimated above this (s)")
    p.add_argument("--worker", nargs=3, metavar=("SPHERE", "RES", "METHOD"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.worker[2], args.steps)
        return
    mpirun = Path(sys.executable).parent / "mpirun"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    print(f"{'sphere':>6} {'cells':>7} {'ranks':>5} {'method':>7} {'s/step':>9} {'cell-steps/s':>13} "
          f"{'field %':>8} {'transport %':>11} {'output s':>9}  note")
    for sphere, res, cells in cases(args.quick):
        for ranks in map(int, args.ranks.split(",")):
            for method in ("direct", "auto"):
                facets = cells * (1.5 if sphere == "S2" else 1.0)
                estimate = (args.steps + 1) * 3 * facets * cells * DIRECT_NS_PER_PAIR * 1e-9 / ranks
                if method == "direct" and estimate > args.budget:
                    print(f"{sphere:>6} {cells:>7} {ranks:>5} {method:>7} {'-':>9} {'-':>13} {'-':>8} {'-':>11} "
                          f"{'-':>9}  skipped: estimated {estimate:.0f} s")
                    continue
                cmd = [str(mpirun), "-n", str(ranks), sys.executable, __file__, "--steps", str(args.steps),
                       "--worker", sphere, str(res), method]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    print(f"{sphere:>6} {cells:>7} {ranks:>5} {method:>7} failed: {out.stderr.strip()[-300:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                share = 100 * r["velocity"] / r["step"]
                print(f"{sphere:>6} {cells:>7} {ranks:>5} {method:>7} {r['step']:>9.4f} {cells / r['step']:>13.3g} "
                      f"{share:>8.1f} {100 - share:>11.1f} {r['output']:>9.3f}  field: {r['evaluator']}", flush=True)


if __name__ == "__main__":
    main()

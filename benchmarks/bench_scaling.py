"""Strong scaling of a PDE step over MPI ranks, and the field's communication per step at scale.

Part 1 (measured): the default clustering case at one icosphere level (finite volumes, fast
field) under ``mpirun -n P`` for P = 1, 2, ... up to the cores present (or ``--ranks``), one
thread per rank; best of ``--steps`` SSP-RK3 steps after one untimed step.  Printed: seconds
per step, the field's share, speedup and efficiency against P = 1, and the densities' largest
difference to the one-rank run (rank-count independence).

Part 2 (modelled, ``--comm-only`` prints only this): the field exchanges one ``Allreduce`` per
evaluation, of the source coefficients (``(L + 3)^2`` complex numbers on S^2, L the degree of
the tolerance rule) plus ``d + 1`` exact sums; SSP-RK3 evaluates three times per step.  For
64..1024 ranks the table gives the bytes per Allreduce and per step, the time of a
recursive-doubling Allreduce ``2 log2(P) alpha + 2 bytes / bandwidth`` for an assumed latency and
bandwidth, and the replicated per-evaluation work (coefficient algebra, which does not shrink
with P) as measured here at P = 1 -- the terms that end strong scaling -- and the modelled
field time per step and parallel efficiency at levels 7 and 8.

    python benchmarks/bench_scaling.py [--level 6] [--ranks 1,2] [--steps 3] [--tol 1e-6]
    python benchmarks/bench_scaling.py --comm-only [--alpha 2e-6] [--bandwidth 1e10]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from common import run_json, setup_process, table


def worker(level: int, steps: int, tol: float, out: str | None) -> None:
    setup_process()
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.discretisation.ordering import gather_rows as gather_global
    from meanfield.pde import build_simulation

    comm = MPI.COMM_WORLD
    config = load_config(None, [f"mesh.resolution={level}", 'nonlocal.method="fast"', f"nonlocal.tol={tol}"])
    sim = build_simulation(config, comm)
    state, t = sim.stepper.step(sim.state, 0.0, 10.0)
    best, field = float("inf"), 0.0
    for _ in range(steps):
        comm.barrier()
        v0, tic = sim.velocity.seconds, time.perf_counter()
        state, dt = sim.stepper.step(state, t, 10.0)
        t += dt
        elapsed = comm.allreduce(time.perf_counter() - tic, op=MPI.MAX)
        if elapsed < best:
            best, field = elapsed, comm.allreduce(sim.velocity.seconds - v0, op=MPI.MAX)
    g = sim.scheme.geometry
    rho = gather_global(comm, sim.scheme.cell_averages(state), g.original_index, sim.num_cells)
    if comm.rank == 0:
        if out:
            np.save(out, rho)
        print(json.dumps({"ranks": comm.size, "step": best, "field": field, "cells": sim.num_cells}))


def field_costs(tol: float, beta: float = 4.0, n: int = 100_000) -> tuple[float, float, int]:
    """Seconds of one evaluation with 10 sources and 10 targets (the work every rank repeats
    whatever P), seconds per cell of a finite-volume evaluation beyond that (one source and
    1.5 targets, fixed points), and the degree L."""
    setup_process()
    from common import interleaved_best

    from meanfield.model import AttentionModel
    from meanfield.nonlocal_field import FastEvaluator

    rng = np.random.default_rng(0)

    def points(k: int) -> np.ndarray:
        x = rng.standard_normal((k, 3))
        return x / np.linalg.norm(x, axis=1)[:, None]

    small, y, x = points(10), points(n), points(3 * n // 2)
    w = np.full(n, 1.0 / n)
    evs = {k: FastEvaluator(AttentionModel(3, beta), tol=tol) for k in ("small", "big")}
    calls = {
        "small": lambda: evs["small"].velocity(small, small, w[:10], fixed_sources=True, fixed_targets=True),
        "big": lambda: evs["big"].velocity(x, y, w, fixed_sources=True, fixed_targets=True),
    }
    for fn in calls.values():
        fn()
    t = interleaved_best(calls, 5)
    return t["small"], (t["big"] - t["small"]) / n, max(evs["big"].degrees)


def communication_table(tol: float, alpha: float, bandwidth: float) -> str:
    replicated, per_cell, L = field_costs(tol)
    payload = 16 * (L + 3) ** 2 + 8 * 4  # complex coefficients of degree L + 2, and [sum w y, sum w]
    rows = []
    for P in (1, 64, 128, 256, 512, 1024):
        allreduce = 2 * np.log2(P) * alpha + 2 * payload / bandwidth if P > 1 else 0.0
        row = [P, payload, 3 * payload, allreduce * 1e6, 3 * allreduce * 1e3, 3 * replicated * 1e3]
        for level in (7, 8):
            cells = 20 * 4**level
            serial = 3 * (replicated + per_cell * cells)
            parallel = 3 * (replicated + per_cell * cells / P + allreduce)
            row += [parallel * 1e3, 100 * serial / (P * parallel)]
        rows.append(row)
    header = ["ranks", "bytes/Allreduce", "bytes/step", "Allreduce us", "comm ms/step", "replicated ms/step",
              "L7 field ms/step", "L7 eff %", "L8 field ms/step", "L8 eff %"]
    return (f"S^2, beta = 4, tol {tol:g} (degree L = {L}); alpha = {alpha:g} s, bandwidth = {bandwidth:g} B/s; "
            f"3 evaluations per SSP-RK3 step; field per rank = 3 (replicated + cells / P x "
            f"{per_cell * 1e9:.0f} ns + Allreduce), measured here at P = 1 (the field only: transport and "
            f"ghost exchange not included)\n" + table(header, rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--level", type=int, default=6)
    p.add_argument("--ranks", default=None, help="comma-separated rank counts (default 1..cores)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--alpha", type=float, default=2e-6, help="assumed Allreduce latency per hop (s)")
    p.add_argument("--bandwidth", type=float, default=1e10, help="assumed network bandwidth (bytes/s)")
    p.add_argument("--comm-only", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.level, args.steps, args.tol, args.out)
        return
    if not args.comm_only:
        cores = len(os.sched_getaffinity(0))
        ranks = [int(r) for r in args.ranks.split(",")] if args.ranks else list(range(1, cores + 1))
        rows, ref = [], None
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for P in ranks:
                out = os.path.join(tmp, f"rho{P}.npy")
                r = run_json([__file__, "--worker", "--level", str(args.level), "--steps", str(args.steps),
                              "--tol", str(args.tol), "--out", out], ranks=P)
                rho = np.load(out)
                ref = ref if ref is not None else (r["step"], rho)
                diff = float(np.abs(rho - ref[1]).max() / np.abs(ref[1]).max())
                speedup = ref[0] / r["step"]
                rows.append([P, r["step"], 100 * r["field"] / r["step"], speedup, 100 * speedup / P, diff])
        print(f"strong scaling, FV level {args.level} ({r['cells']} cells), tol {args.tol:g}, {cores} cores present")
        print(table(["ranks", "s/step", "field %", "speedup", "efficiency %", "max |rho - rho_1| / max rho"], rows))
        print()
    print(communication_table(args.tol, args.alpha, args.bandwidth))


if __name__ == "__main__":
    main()

"""PDE step time, field share, output cost and peak memory per icosphere level: current code
against the baseline (the field before the transforms, loaded from git), measured in the same run.

Each (level, implementation) runs in a fresh process (so its peak memory is its own): it builds
the default clustering case (S^2, three bumps, softmax, beta = 4, finite volumes unless
``--scheme dg1``) with the fast field, takes one untimed step (plans, caches), then
``--steps`` timed SSP-RK3 steps, and evaluates the outputs' observables (energy included)
once.  The baseline swaps its own fast evaluator into the same simulation and computes the
energy as it did then (the field at the source points).  Printed: cells, seconds per step of
both and their ratio, the field's share of a step, the output observables' seconds, and peak
resident memory (MiB; ``ru_maxrss``, the whole process including mesh and dolfinx).

    python benchmarks/bench_solver.py [--levels 4,5,6,7,8] [--steps 3] [--tol 1e-6] [--old-tol 1e-10]
                                      [--old-max-level 8] [--scheme fv] [--rounds 2]

Each row is the fastest of ``--rounds`` fresh processes per implementation, new and old
alternating (a shared machine's load changes between processes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from common import peak_rss_mb, run_json, setup_process, table


def baseline_energy(evaluator, points: np.ndarray, weights: np.ndarray) -> float:
    """The energy as ``observables.interaction_energy`` computed it in the baseline."""
    values = evaluator.evaluate(points, points, weights, fixed_sources=True)
    head_w = np.array([h.weight for h in evaluator.model.heads])
    return float(head_w @ (values.partition_function() @ weights)) / (2.0 * evaluator.model.beta)


def worker(level: int, impl: str, args) -> None:
    setup_process(baseline=impl == "old")
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.discrete_pde import DiscretePDE
    from meanfield.observables import measure_observables, moment_observables
    from meanfield.problem import Problem

    tol = args.tol if impl == "new" else args.old_tol
    config = load_config(None, [f"mesh.resolution={level}", f'scheme.kind="{args.scheme}"',
                                'nonlocal.method="fast"', f"nonlocal.tol={tol}"])
    sim = DiscretePDE(Problem(config), MPI.COMM_SELF)
    build_rss = peak_rss_mb()
    if impl == "old":
        from baseline import load_baseline

        sim.field.evaluator = load_baseline().FastEvaluator(sim.problem.model(), MPI.COMM_SELF, tol)
    state, t = sim.state, 0.0
    tic = time.perf_counter()
    state, dt = sim.stepper.step(state, t, 10.0)
    first = time.perf_counter() - tic
    steps, fields = [], []
    for _ in range(args.steps):
        v0, tic = sim.velocity.seconds, time.perf_counter()
        state, dt = sim.stepper.step(state, t, 10.0)
        t += dt
        steps.append(time.perf_counter() - tic)
        fields.append(sim.velocity.seconds - v0)
    points, weights = sim.scheme.measure(state)
    tic = time.perf_counter()
    if impl == "new":
        energy = measure_observables(sim.evaluator, points, weights, fixed_sources=True)["energy"]
    else:
        moment_observables(sim.comm, points, weights)
        energy = baseline_energy(sim.evaluator, points, weights)
    output = time.perf_counter() - tic
    best = int(np.argmin(steps))
    print(json.dumps({"cells": sim.num_cells, "first": first, "step": steps[best], "field": fields[best],
                      "output": output, "energy": energy, "build_rss": build_rss, "peak_rss": peak_rss_mb(),
                      "evaluator": sim.evaluator.diagnostics().get("method")}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--levels", default="4,5,6,7,8")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tol", type=float, default=1e-6, help="tolerance of the current evaluator")
    p.add_argument("--old-tol", type=float, default=1e-10, help="baseline tolerance (its default)")
    p.add_argument("--old-max-level", type=int, default=8, help="finest level run with the baseline")
    p.add_argument("--scheme", default="fv", choices=("fv", "dg1"))
    p.add_argument("--rounds", type=int, default=2, help="fresh processes per (level, implementation), new and "
                   "old alternating; the fastest counts")
    p.add_argument("--worker", nargs=2, metavar=("LEVEL", "IMPL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(int(args.worker[0]), args.worker[1], args)
        return
    header = ["level", "cells", "new s/step", "old s/step", "old/new", "new field %", "old field %",
              "new output s", "old output s", "new peak MiB", "old peak MiB", "after build MiB"]
    print(f"{args.scheme}, S^2 default clustering case, one thread; new tol {args.tol:g}, old tol {args.old_tol:g}; "
          f"best of {args.steps} steps")
    rows = []
    common_args = [__file__, "--steps", str(args.steps), "--tol", str(args.tol), "--old-tol", str(args.old_tol),
                   "--scheme", args.scheme]
    for level in map(int, args.levels.split(",")):
        runs: dict[str, list[dict]] = {"new": [], "old": []}
        for _ in range(args.rounds):
            for impl in ("new", "old") if level <= args.old_max_level else ("new",):
                runs[impl].append(run_json(common_args + ["--worker", str(level), impl]))
        new = min(runs["new"], key=lambda r: r["step"])
        old = min(runs["old"], key=lambda r: r["step"]) if runs["old"] else None
        nan = float("nan")
        rows.append([
            f"L{level}", new["cells"], new["step"], old["step"] if old else nan,
            old["step"] / new["step"] if old else nan, 100 * new["field"] / new["step"],
            100 * old["field"] / old["step"] if old else nan, new["output"], old["output"] if old else nan,
            new["peak_rss"], old["peak_rss"] if old else nan, new["build_rss"],
        ])
        if old:
            assert abs(new["energy"] - old["energy"]) <= 1e-6 * abs(old["energy"]), (new["energy"], old["energy"])
        print(table(header, rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(header, rows))


if __name__ == "__main__":
    sys.exit(main())

"""Cost and memory of an adjoint solve (meanfield.adjoint) against the forward run it linearises.

    python benchmarks/bench_adjoint.py [--cases s1-1024,s2-5] [--schemes fv,dg1] [--methods direct,fast]
                                       [--t-final 0.1] [--observables 1]

For each case, scheme and field method, three fresh one-thread processes (so each reports its own
peak memory) run the same softmax case (general Q, K, V, beta = 4, two vMF bumps) to ``--t-final``
with the adaptive SSP-RK3 step (the adjoint replays the forward run's steps):

* ``forward``: the plain forward run (``PDESimulation.step``), its CPU time and peak RSS;
* ``adjoint``: the forward run recorded (:meth:`~meanfield.adjoint.AdjointSolver.forward`,
  checkpointed) and the backward sweep for ``--observables`` observables at the final time
  (:meth:`~meanfield.adjoint.AdjointSolver.backward`: the segments recomputed, three
  linearisations and three adjoint sums per step), CPU times and peak RSS.

Prints the backward sweep's time over the forward run's (goal: at most 3), the whole adjoint
solve's (recording + backward) and the peak memory ratio (goal: at most 2), with the memory
above the process's size after the set-up (mesh, dolfinx, evaluators) beside the totals.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from common import peak_rss_mb, run_json, setup_process, table

CASES = {"s1-1024": ("S1", 1024), "s1-256": ("S1", 256), "s2-5": ("S2", 5), "s2-4": ("S2", 4), "s2-3": ("S2", 3)}


def config(sphere: str, resolution: int, scheme: str, method: str, t_final: float) -> dict:
    eye3 = [[1, 0.2, 0], [0, 1, 0], [0, 0.1, 1]]
    matrices = {"Q": [[1, 0.2], [0, 1]], "V": [[1, 0.3], [-0.1, 1]]} if sphere == "S1" else {"Q": eye3, "V": eye3}
    centers = [[1.0, 0.0], [-0.5, 0.8]] if sphere == "S1" else [[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]]
    return {"name": "bench-adjoint", "mesh": {"sphere": sphere, "resolution": resolution},
            "scheme": {"kind": scheme}, "nonlocal": {"method": method},
            "model": {"attention": "softmax", "beta": 4.0, **matrices},
            "initial": {"kind": "vmf", "centers": centers, "kappas": [4.0, 4.0]},
            "time": {"t_final": t_final}}


def worker(mode: str, data: dict, observables: int) -> dict:
    """One process: the forward run or the adjoint solve; times (CPU) and peak memory."""
    import numpy as np
    from mpi4py import MPI

    from meanfield.adjoint import AdjointSolver
    from meanfield.config import load_config
    from meanfield.drivers.pde import PDESimulation
    from meanfield.problem import Problem

    setup_process()
    sim = PDESimulation(Problem(load_config(data)), MPI.COMM_WORLD)
    T = data["time"]["t_final"]
    set_up = peak_rss_mb()
    out: dict = {"set_up_mb": set_up}
    tic = time.process_time()
    if mode == "forward":
        while T - sim.t > 1e-12:
            sim.step(T)
        out["forward_s"] = time.process_time() - tic
    else:
        solver = AdjointSolver(sim)
        solver.forward([T])
        out["record_s"] = time.process_time() - tic
        c = solver.operator.points  # the adjoint's rows (FV: centroids; DG1: the cells' vertices)
        phis = np.stack([c[:, 0] ** (k + 1) + 0.3 * c[:, 1] for k in range(observables)], axis=1)
        tic = time.process_time()
        solver.backward({T: phis[None]})
        out["backward_s"] = time.process_time() - tic
        out["kept"], out["steps"] = len(solver.trajectory.kept), len(solver.trajectory.steps)
    out["peak_mb"] = peak_rss_mb()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="s1-1024,s2-5")
    parser.add_argument("--schemes", default="fv,dg1")
    parser.add_argument("--methods", default="direct,fast")
    parser.add_argument("--t-final", type=float, default=0.1)
    parser.add_argument("--observables", type=int, default=1)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        mode, data = args.worker.split(":", 1)
        print(json.dumps(worker(mode, json.loads(data), args.observables)))
        return
    rows = []
    for name in args.cases.split(","):
        sphere, resolution = CASES[name]
        for scheme in args.schemes.split(","):
            for method in args.methods.split(","):
                data = json.dumps(config(sphere, resolution, scheme, method, args.t_final))
                forward = run_json([sys.argv[0], "--worker", f"forward:{data}", "--observables", str(args.observables)])
                adjoint = run_json([sys.argv[0], "--worker", f"adjoint:{data}", "--observables", str(args.observables)])
                f, a = forward["forward_s"], adjoint
                extra_f = forward["peak_mb"] - forward["set_up_mb"]
                extra_a = adjoint["peak_mb"] - adjoint["set_up_mb"]
                rows.append([name, scheme, method, f, a["backward_s"], a["backward_s"] / f,
                             (a["record_s"] + a["backward_s"]) / f, forward["peak_mb"], adjoint["peak_mb"],
                             adjoint["peak_mb"] / forward["peak_mb"], extra_f, extra_a, f"{a['kept']}/{a['steps']}"])
                print(table(["case", "scheme", "field", "forward s", "backward s", "backward/forward",
                             "solve/forward", "peak fwd MB", "peak adj MB", "peak ratio", "fwd above set-up MB",
                             "adj above set-up MB", "kept/steps"], rows[-1:]), flush=True)
    print()
    print(table(["case", "scheme", "field", "forward s", "backward s", "backward/forward", "solve/forward",
                 "peak fwd MB", "peak adj MB", "peak ratio", "fwd above set-up MB", "adj above set-up MB",
                 "kept/steps"], rows))


if __name__ == "__main__":
    main()

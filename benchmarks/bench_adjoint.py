"""Cost and memory of an adjoint solve (meanfield.adjoint) against the forward run it linearises.

    python benchmarks/bench_adjoint.py [--cases s1-1024,s2-5,s2-clustering] [--schemes fv,dg1]
                                       [--methods direct,fast] [--t-final 0.1] [--observables 1] [--memory]
                                       [--stage-budget BYTES]

For each case, scheme and field method, one fresh one-thread process runs, one after the
other, the same softmax case (general Q, K, V, beta = 4, two vMF bumps) to ``--t-final``
with the adaptive SSP-RK3 step (the adjoint replays the forward run's steps):

* ``forward``: the plain forward run (``DiscretePDE.step``), its CPU time;
* ``gradient``: the forward run recorded (:meth:`~meanfield.adjoint.AdjointSolver.forward`,
  checkpointed, every step's stages kept while they fit the stage budget) and the backward sweep
  for ``--observables`` observables at the final time
  (:meth:`~meanfield.adjoint.AdjointSolver.backward`: the segments whose stages were not kept
  recomputed, three linearisations and three adjoint sums per step), CPU times.

and prints the gradient's time over the forward run's ((record + backward) / forward, goal:
at most 3) and the backward sweep's alone, with the steps whose stages were kept (``--stage-budget
0`` keeps none: every segment is recomputed, as before stages were kept; default: the budget of
:func:`meanfield.memory.stage_budget`).  The case ``s2-clustering`` is
``runs/examples/s2-clustering.toml`` as it is (t_final = 6, its default ``auto`` field and the
FV scheme unless ``--schemes`` says otherwise) with the columns of ``meanfield response
s2-clustering.toml --observable z --observable 'q=x**2 - y**2' --at 1,3,6`` (two observables
at three times).  With ``--memory`` the forward run and the adjoint solve also run in two
further processes each, which report their peak memory (goal for the ratio: at most 2), with
the memory above the process's size after the set-up (mesh, dolfinx, evaluators) beside.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import peak_rss_mb, run_json, setup_process, table

CASES = {"s1-1024": ("S1", 1024), "s1-256": ("S1", 256), "s2-5": ("S2", 5), "s2-4": ("S2", 4), "s2-3": ("S2", 3),
         "s2-clustering": ("S2", 4)}
#: The example of ``s2-clustering`` and the response study timed on it (observables, times).
EXAMPLE = Path(__file__).resolve().parents[1] / "runs" / "examples" / "s2-clustering.toml"
EXAMPLE_OBSERVABLES = ("z", "x**2 - y**2")
EXAMPLE_TIMES = (1.0, 3.0, 6.0)


def example_config(scheme: str, method: str) -> dict:
    """``runs/examples/s2-clustering.toml`` with the scheme (and, unless ``auto``, the field method)."""
    import tomllib

    data = tomllib.loads(EXAMPLE.read_text())
    data["scheme"] = {"kind": scheme}
    if method != "auto":
        data["nonlocal"] = {"method": method}
    return data


def config(sphere: str, resolution: int, scheme: str, method: str, t_final: float) -> dict:
    eye3 = [[1, 0.2, 0], [0, 1, 0], [0, 0.1, 1]]
    matrices = {"Q": [[1, 0.2], [0, 1]], "V": [[1, 0.3], [-0.1, 1]]} if sphere == "S1" else {"Q": eye3, "V": eye3}
    centers = [[1.0, 0.0], [-0.5, 0.8]] if sphere == "S1" else [[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]]
    return {"name": "bench-adjoint", "mesh": {"sphere": sphere, "resolution": resolution},
            "scheme": {"kind": scheme}, "nonlocal": {"method": method},
            "model": {"attention": "softmax", "beta": 4.0, **matrices},
            "initial": {"kind": "vmf", "centers": centers, "kappas": [4.0, 4.0]},
            "time": {"t_final": t_final}}


def finals(sim, data: dict, observables: int) -> dict:
    """The backward sweep's final values: time -> (1, cells, columns) (per cell: constant in each
    cell for DG1, whose adjoint takes them as such)."""
    import numpy as np

    from meanfield.expression import compile_expression

    c = sim.owned_cells()[0]
    if data["name"] != "s2-clustering":
        T = data["time"]["t_final"]
        return {T: np.stack([c[:, 0] ** (k + 1) + 0.3 * c[:, 1] for k in range(observables)], axis=1)[None]}
    phis = np.stack([compile_expression(text, "observable")(c) for text in EXAMPLE_OBSERVABLES], axis=1)
    P, out = phis.shape[1], {}
    for i, t in enumerate(EXAMPLE_TIMES):
        final = np.zeros((1, len(c), P * len(EXAMPLE_TIMES)))
        final[0, :, i * P:(i + 1) * P] = phis
        out[t] = final
    return out


def worker(mode: str, data: dict, observables: int, stage_budget: float | None = None) -> dict:
    """One process: the forward run, the adjoint solve, or both one after the other
    (``gradient``); CPU times and peak memory."""
    from mpi4py import MPI

    from meanfield.adjoint import AdjointSolver
    from meanfield.config import load_config
    from meanfield.discrete_pde import DiscretePDE
    from meanfield.problem import Problem

    setup_process()
    problem = Problem(load_config(data))
    T = data["time"]["t_final"]
    out: dict = {}
    if mode in ("forward", "gradient"):
        sim = DiscretePDE(problem, MPI.COMM_WORLD)
        out["set_up_mb"] = peak_rss_mb()
        tic = time.process_time()
        while T - sim.t > 1e-12:
            sim.step(T)
        out["forward_s"] = time.process_time() - tic
    if mode in ("adjoint", "gradient"):
        sim = DiscretePDE(problem, MPI.COMM_WORLD)
        out.setdefault("set_up_mb", peak_rss_mb())
        ends = finals(sim, data, observables)
        tic = time.process_time()
        solver = AdjointSolver(sim, stage_budget=stage_budget)
        solver.forward(sorted(ends))
        out["record_s"] = time.process_time() - tic
        tic = time.process_time()
        solver.backward(ends)
        out["backward_s"] = time.process_time() - tic
        out["kept"], out["steps"] = len(solver.trajectory.kept), len(solver.trajectory.steps)
        out["stages"], out["stage_mb"] = len(solver.trajectory.stages), solver.trajectory.stage_bytes / 1e6
    out["peak_mb"] = peak_rss_mb()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="s1-1024,s2-5,s2-clustering")
    parser.add_argument("--schemes", default="fv,dg1")
    parser.add_argument("--methods", default="direct,fast")
    parser.add_argument("--t-final", type=float, default=0.1)
    parser.add_argument("--observables", type=int, default=1)
    parser.add_argument("--memory", action="store_true", help="also the peak memory, in separate processes")
    parser.add_argument("--stage-budget", type=float, help="bytes of kept stages (0: recompute every segment)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        mode, data = args.worker.split(":", 1)
        print(json.dumps(worker(mode, json.loads(data), args.observables, args.stage_budget)))
        return
    header = ["case", "scheme", "field", "steps", "columns", "forward s", "record s", "backward s",
              "gradient/forward", "backward/forward", "stages kept", "stages MB"]
    memory_header = ["case", "scheme", "field", "peak fwd MB", "peak adj MB", "peak ratio", "fwd above set-up MB",
                     "adj above set-up MB", "kept/steps"]
    rows, memory = [], []
    for name in args.cases.split(","):
        sphere, resolution = CASES[name]
        example = name == "s2-clustering"
        for scheme in args.schemes.split(","):
            for method in (["auto"] if example else args.methods.split(",")):
                data = example_config(scheme, method) if example else \
                    config(sphere, resolution, scheme, method, args.t_final)
                columns = len(EXAMPLE_OBSERVABLES) * len(EXAMPLE_TIMES) if example else args.observables
                call = ["--observables", str(args.observables)]
                if args.stage_budget is not None:
                    call += ["--stage-budget", str(args.stage_budget)]
                g = run_json([sys.argv[0], "--worker", f"gradient:{json.dumps(data)}", *call])
                f = g["forward_s"]
                rows.append([name, scheme, method, g["steps"], columns, f, g["record_s"], g["backward_s"],
                             (g["record_s"] + g["backward_s"]) / f, g["backward_s"] / f,
                             f"{g['stages']}/{g['steps']}", g["stage_mb"]])
                print(table(header, rows[-1:]), flush=True)
                if args.memory:
                    forward = run_json([sys.argv[0], "--worker", f"forward:{json.dumps(data)}", *call])
                    adjoint = run_json([sys.argv[0], "--worker", f"adjoint:{json.dumps(data)}", *call])
                    memory.append([name, scheme, method, forward["peak_mb"], adjoint["peak_mb"],
                                   adjoint["peak_mb"] / forward["peak_mb"], forward["peak_mb"] - forward["set_up_mb"],
                                   adjoint["peak_mb"] - adjoint["set_up_mb"], f"{adjoint['kept']}/{adjoint['steps']}"])
                    print(table(memory_header, memory[-1:]), flush=True)
    print()
    print(table(header, rows))
    if memory:
        print()
        print(table(memory_header, memory))


if __name__ == "__main__":
    main()

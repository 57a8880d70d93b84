"""Strong scaling of a PDE step over MPI ranks, and a model of the step at scale.

Part 1 (measured): the default clustering case at one icosphere level (finite volumes, fast
field) under ``mpirun -n P`` for P = 1, 2, ... up to the cores present (or ``--ranks``), one
thread per rank; best of ``--steps`` SSP-RK3 steps after one untimed step.  Printed: seconds
per step, the field's share, speedup and efficiency against P = 1, the densities' largest
difference to the one-rank run (rank-count independence), and what the model below takes from
these runs: transport seconds per cell (the step less the field, at P = 1), ghost cells per
rank, and, for reference, this machine's cost of one ghost exchange, one scalar ``Allreduce``
and one gather of the densities to rank 0.

Part 2 (modelled, ``--comm-only`` skips part 1's timings but still runs P = 1 and 2 for the
measured terms): per SSP-RK3 step (three stages), every rank does

* the field, three times: the work every rank repeats whatever P (one evaluation at 10 sources
  and 10 targets, measured here), the per-cell work over ``cells / P`` (measured here), and one
  ``Allreduce`` of the coefficients, ``(L + 3)^2`` complex numbers plus ``d + 1`` exact sums;
* transport over ``cells / P`` (measured per cell at P = 1);
* one ghost exchange per stage: ``--neighbours`` messages of ``alpha`` each and the ghost
  cells' bytes over the bandwidth, ghost cells per rank scaled from the P = 2 partition by the
  perimeter of a part, ``sqrt(cells / P)``;
* one scalar ``Allreduce`` per stage (the CFL bound) and one per step (the run controller);
* at outputs, every ``--steps-per-output`` steps: the densities gathered to rank 0
  (``log2 P`` messages and ``8 cells`` bytes) and four scalar reductions (observables).

An ``Allreduce`` of b bytes costs ``2 log2(P) alpha + 2 b / bandwidth`` (recursive doubling);
``--alpha`` and ``--bandwidth`` are the assumed network (defaults 2e-6 s, 1e10 B/s).  The
tables give, for levels 7 and 8 at 64..4096 ranks, each term per step, the modelled field and
step times and their parallel efficiency against one rank.  ``--baseline REV`` also measures
the replicated field term of the code at git revision REV in the same process (interleaved).

    python benchmarks/bench_scaling.py [--level 6] [--ranks 1,2] [--steps 3] [--tol 1e-6]
    python benchmarks/bench_scaling.py --comm-only [--alpha 2e-6] [--bandwidth 1e10] [--baseline main]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np
from common import run_json, setup_process, table

#: Field evaluations (SSP-RK3 stages) per step.
STAGES = 3
#: Scalar reductions of the observables at an output.
OUTPUT_REDUCTIONS = 4
#: Repeats of the small collectives timed in the worker.
COLLECTIVE_REPEATS = 50


def best_seconds(comm, fn, repeats: int = COLLECTIVE_REPEATS) -> float:
    """Best over ``repeats`` of the slowest rank's seconds for the collective ``fn``."""
    from mpi4py import MPI

    best = float("inf")
    for _ in range(repeats):
        comm.barrier()
        tic = time.perf_counter()
        fn()
        best = min(best, comm.allreduce(time.perf_counter() - tic, op=MPI.MAX))
    return best


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
    costs = {
        "ghosts": comm.allreduce(g.num_local - g.num_owned, op=MPI.MAX),
        "exchange": best_seconds(comm, sim.scheme.function.x.scatter_forward),
        "reduction": best_seconds(comm, lambda: comm.allreduce(1.0, op=MPI.MAX)),
        "gather": best_seconds(comm, lambda: gather_global(comm, state, g.original_index, sim.num_cells), 5),
    }
    if comm.rank == 0:
        if out:
            np.save(out, rho)
        print(json.dumps({"ranks": comm.size, "step": best, "field": field, "cells": sim.num_cells, **costs}))


@dataclass
class FieldCosts:
    """Measured field costs at P = 1: seconds of the work every rank repeats per evaluation,
    seconds per source cell beyond it (1.5 targets per cell), and the degree L."""

    replicated: float
    per_cell: float
    degree: int


def field_costs(tol: float, baseline: str | None = None, beta: float = 4.0,
                n: int = 100_000) -> dict[str, FieldCosts]:
    """:class:`FieldCosts` of the working tree (``"current"``) and, with ``baseline`` (a git
    revision), of that revision's evaluator, timed interleaved in this process.  The replicated
    work is one evaluation with 10 sources and 10 targets; the per-cell cost is that of one with
    ``n`` sources and ``1.5 n`` targets (fixed points) less it, over ``n``."""
    setup_process()
    from common import interleaved_best

    from meanfield.model import AttentionModel
    from meanfield.nonlocal_field import FastEvaluator

    classes = {"current": FastEvaluator}
    if baseline is not None:
        from baseline import load_baseline

        classes[baseline] = load_baseline(baseline).FastEvaluator
    rng = np.random.default_rng(0)

    def points(k: int) -> np.ndarray:
        x = rng.standard_normal((k, 3))
        return x / np.linalg.norm(x, axis=1)[:, None]

    small, y, x = points(10), points(n), points(3 * n // 2)
    w = np.full(n, 1.0 / n)
    calls, degrees = {}, {}
    for name, cls in classes.items():
        evs = {k: cls(AttentionModel(3, beta), tol=tol) for k in ("small", "big")}
        calls[name, "small"] = lambda e=evs["small"]: e.velocity(small, small, w[:10], fixed_sources=True,
                                                                   fixed_targets=True)
        calls[name, "big"] = lambda e=evs["big"]: e.velocity(x, y, w, fixed_sources=True, fixed_targets=True)
        degrees[name] = max(evs["big"].degrees)
    for fn in calls.values():
        fn()
    t = interleaved_best(calls, 7)
    return {name: FieldCosts(t[name, "small"], (t[name, "big"] - t[name, "small"]) / n, degrees[name])
            for name in classes}


@dataclass
class Network:
    """The assumed network: latency per message (s) and bandwidth (B/s)."""

    alpha: float
    bandwidth: float

    def allreduce(self, P: int, nbytes: float) -> float:
        """Recursive-doubling ``Allreduce`` of ``nbytes`` over P ranks."""
        return 2 * np.log2(P) * self.alpha + 2 * nbytes / self.bandwidth if P > 1 else 0.0

    def gather(self, P: int, nbytes: float) -> float:
        """Binomial-tree gather of ``nbytes`` in all to one rank."""
        return np.log2(P) * self.alpha + nbytes / self.bandwidth if P > 1 else 0.0


@dataclass
class StepModel:
    """Measured per-cell and per-evaluation costs, and the assumptions, of the model step."""

    field: FieldCosts
    transport_per_cell: float  # seconds per cell and step, at P = 1
    ghosts_per_sqrt_cells: float  # ghost cells of a part over sqrt(cells per part), from P = 2
    network: Network
    neighbours: int
    steps_per_output: int

    def terms(self, cells: int, P: int) -> dict[str, float]:
        """Seconds per step of each term at ``cells`` cells on P ranks."""
        net, f = self.network, self.field
        payload = 16 * (f.degree + 3) ** 2 + 8 * 4  # complex coefficients of degree L + 2, and [sum w y, sum w]
        ghosts = self.ghosts_per_sqrt_cells * np.sqrt(cells / P) if P > 1 else 0.0
        exchange = self.neighbours * net.alpha + 8 * ghosts / net.bandwidth if P > 1 else 0.0
        output = net.gather(P, 8 * cells) + OUTPUT_REDUCTIONS * net.allreduce(P, 8)
        return {
            "replicated": STAGES * f.replicated,
            "field cells": STAGES * f.per_cell * cells / P,
            "coeff Allreduce": STAGES * net.allreduce(P, payload),
            "transport": self.transport_per_cell * cells / P,
            "ghost exchange": STAGES * exchange,
            "CFL + control": (STAGES + 1) * net.allreduce(P, 8),
            "outputs": output / self.steps_per_output,
        }

    def table(self, level: int) -> str:
        cells = 20 * 4**level
        field_terms = ("replicated", "field cells", "coeff Allreduce")
        serial = self.terms(cells, 1)
        serial_field = sum(serial[k] for k in field_terms)
        serial_step = sum(serial.values())
        rows = []
        for P in (1, 64, 128, 256, 512, 1024, 2048, 4096):
            terms = self.terms(cells, P)
            field = sum(terms[k] for k in field_terms)
            step = sum(terms.values())
            rows.append([P] + [1e6 * v for v in terms.values()]
                        + [1e3 * field, 100 * serial_field / (P * field), 1e3 * step, 100 * serial_step / (P * step)])
        header = ["ranks"] + [f"{k} us" for k in serial] + ["field ms", "field eff %", "step ms", "step eff %"]
        return f"level {level} ({cells} cells), per SSP-RK3 step\n" + table(header, rows)


def measured_runs(args: argparse.Namespace, ranks: list[int]) -> list[dict]:
    """The worker's JSON at each rank count, with ``diff``: the densities' largest difference to
    the first run's, relative to their largest value."""
    runs, ref = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for P in ranks:
            out = os.path.join(tmp, f"rho{P}.npy")
            r = run_json([__file__, "--worker", "--level", str(args.level), "--steps", str(args.steps),
                          "--tol", str(args.tol), "--out", out], ranks=P)
            rho = np.load(out)
            ref = ref if ref is not None else rho
            runs.append({**r, "diff": float(np.abs(rho - ref).max() / np.abs(ref).max())})
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--level", type=int, default=6)
    p.add_argument("--ranks", default=None, help="comma-separated rank counts (default 1..cores)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--alpha", type=float, default=2e-6, help="assumed latency per message (s)")
    p.add_argument("--bandwidth", type=float, default=1e10, help="assumed network bandwidth (bytes/s)")
    p.add_argument("--neighbours", type=int, default=6, help="assumed ghost-exchange neighbours per rank")
    p.add_argument("--steps-per-output", type=int, default=10, help="steps between outputs in the model")
    p.add_argument("--baseline", default=None, help="git revision whose replicated field term to measure too")
    p.add_argument("--comm-only", action="store_true", help="skip the scaling table (P = 1, 2 still run)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.level, args.steps, args.tol, args.out)
        return
    cores = len(os.sched_getaffinity(0))
    if args.comm_only:
        ranks = [1, 2]
    else:
        ranks = [int(r) for r in args.ranks.split(",")] if args.ranks else list(range(1, cores + 1))
    runs = measured_runs(args, sorted(set(ranks) | {1, 2}))
    one, two = runs[0], next(r for r in runs if r["ranks"] == 2)
    if not args.comm_only:
        rows = [[r["ranks"], r["step"], 100 * r["field"] / r["step"], one["step"] / r["step"],
                 100 * one["step"] / (r["step"] * r["ranks"]), r["diff"]] for r in runs if r["ranks"] in ranks]
        print(f"strong scaling, FV level {args.level} ({one['cells']} cells), tol {args.tol:g}, {cores} cores present")
        print(table(["ranks", "s/step", "field %", "speedup", "efficiency %", "max |rho - rho_1| / max rho"], rows))
        print()
    costs = field_costs(args.tol, args.baseline)
    rows = [[name, 1e3 * c.replicated, 1e9 * c.per_cell, c.degree] for name, c in costs.items()]
    print("field costs at P = 1, measured in one process (interleaved, best of 7)")
    print(table(["code", "replicated ms/evaluation", "ns/cell", "degree L"], rows))
    print()
    transport = (one["step"] - one["field"]) / one["cells"]
    per_sqrt = two["ghosts"] / np.sqrt(two["cells"] / 2)
    print(f"measured at level {args.level}: transport {1e9 * transport:.0f} ns/cell/step (P = 1); P = 2: "
          f"{two['ghosts']} ghost cells per rank, ghost exchange {1e6 * two['exchange']:.1f} us, scalar Allreduce "
          f"{1e6 * two['reduction']:.1f} us, gather to rank 0 {1e3 * two['gather']:.2f} ms; "
          f"densities P = 2 vs 1: {two['diff']:.1e}")
    model = StepModel(costs["current"], transport, per_sqrt, Network(args.alpha, args.bandwidth), args.neighbours,
                      args.steps_per_output)
    print(f"model: alpha = {args.alpha:g} s, bandwidth = {args.bandwidth:g} B/s, {args.neighbours} neighbours, "
          f"an output every {args.steps_per_output} steps; {STAGES} field evaluations per step")
    for level in (7, 8):
        print(model.table(level))
        print()


if __name__ == "__main__":
    main()

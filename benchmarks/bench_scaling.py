"""Strong scaling of a PDE step over MPI ranks, and a model of the step at scale.

Part 1 (measured): the default clustering case at one icosphere level (finite volumes, fast
field) under ``mpirun -n P`` for P = 1, 2, ... up to the cores present (or ``--ranks``), one
thread per rank; best of ``--steps`` SSP-RK3 steps after one untimed step.  Printed: seconds
per step, the field's share, speedup and efficiency against P = 1, the densities' largest
difference to the one-rank run (rank-count independence), and what the model below takes from
these runs: transport seconds per cell (the step less the field, at P = 1), ghost cells per
rank, and, for reference, this machine's cost of one ghost exchange, one scalar ``Allreduce``
and one gather of the densities to rank 0.

Part 2 (modelled, ``--comm-only`` skips part 1's table but still runs P = 1 and 2 for the
measured terms): per SSP-RK3 step (three stages), every rank does

* the field, three times: one evaluation at the rank's ``n = cells / P`` sources and
  ``1.5 n`` targets (fixed points, as the mesh's), *measured here* on one core at every ``n``
  of the tables (interleaved, best of ``--repeats``): its work that does not shrink with P
  (coefficient algebra, a NUFFT's grid FFT, Python) is in the measurement, not assumed; and one
  ``Allreduce`` of the coefficients, ``(L + 3)^2`` complex numbers plus ``d + 3`` sums;
* transport over ``cells / P`` (measured per cell at P = 1);
* one ghost exchange per stage: ``--neighbours`` messages of ``alpha`` each and the ghost
  cells' bytes over the bandwidth, ghost cells per rank scaled from the P = 2 partition by the
  perimeter of a part, ``sqrt(cells / P)``;
* one scalar ``Allreduce`` per stage (the CFL bound) and one per step (the run controller);
* at outputs, every ``--steps-per-output`` steps: the densities gathered to rank 0
  (``log2 P`` messages and ``8 cells`` bytes) and four scalar reductions (observables).

An ``Allreduce`` of b bytes costs ``2 log2(P) alpha + 2 b / bandwidth`` (recursive doubling);
``--alpha`` and ``--bandwidth`` are the assumed network (defaults 2e-6 s, 1e10 B/s).  The
tables give, for levels 7 and 8 at 1 and 64..4096 ranks, each term per step, the modelled
field and step times and their parallel efficiency against one rank at the best rate per cell
measured at any n (:meth:`StepModel.efficiencies`: cache gains are not parallel speedup).
``--baseline REV`` runs the same measurements (part 1's steps and part 2's evaluations) with
the nonlocal field of git revision REV in the same run, interleaved, and prints its tables and
the goals before and after.  ``--direct-sums`` measures the working tree with
``nonlocal.direct_sums = true`` (a rank's few mesh points summed exactly instead of a NUFFT,
whose grid FFT every rank repeats; rank counts then agree to the NUFFT's accuracy, not to
round-off), the default without.

    python benchmarks/bench_scaling.py [--level 6] [--ranks 1,2] [--steps 3] [--tol 1e-6] [--direct-sums]
    python benchmarks/bench_scaling.py --comm-only [--alpha 2e-6] [--bandwidth 1e10] [--baseline 14fe2db]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from common import run_json, setup_process, table

#: Field evaluations (SSP-RK3 stages) per step.
STAGES = 3
#: Scalar reductions of the observables at an output.
OUTPUT_REDUCTIONS = 4
#: Repeats of the small collectives timed in the worker.
COLLECTIVE_REPEATS = 50
#: Rank counts and icosphere levels of the model tables.
PROCS = (1, 64, 128, 256, 512, 1024, 2048, 4096)
MODEL_LEVELS = (7, 8)
#: Points of the smallest timed evaluation: what does not shrink with the rank count.
FIXED_POINTS = 10
#: Short field evaluations are timed over more rounds than ``--repeats``: as many as fill this
#: many seconds, at most MAX_ROUNDS (on a shared machine a short call is often interrupted).
ROUND_SECONDS = 0.5
MAX_ROUNDS = 200
#: The model's terms that are the field's.
FIELD_TERMS = ("field local", "coeff Allreduce")


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


def worker(level: int, steps: int, tol: float, out: str | None, baseline: str | None, direct_sums: bool) -> None:
    setup_process()
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.discrete_pde import DiscretePDE
    from meanfield.nonlocal_field import select
    from meanfield.problem import Problem

    if baseline is not None:  # the same solver with the nonlocal field of another revision
        from baseline import load_baseline

        old = load_baseline(baseline).FastEvaluator
        select.FastEvaluator = lambda model, comm=None, tol=1e-6, direct_sums=False: old(model, comm, tol)  # type: ignore
    comm = MPI.COMM_WORLD
    config = load_config(None, [f"mesh.resolution={level}", 'nonlocal.method="fast"', f"nonlocal.tol={tol}",
                                f"nonlocal.direct_sums={str(direct_sums and baseline is None).lower()}"])
    sim = DiscretePDE(Problem(config), comm)
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
    rho = sim.gather(sim.scheme.cell_averages(state))
    costs = {
        "ghosts": comm.allreduce(g.num_local - g.num_owned, op=MPI.MAX),
        "exchange": best_seconds(comm, lambda: sim.scheme.ghosts(sim.scheme.cell_averages(state))),
        "reduction": best_seconds(comm, lambda: comm.allreduce(1.0, op=MPI.MAX)),
        "gather": best_seconds(comm, lambda: sim.gather(state), 5),
    }
    if comm.rank == 0:
        if out:
            np.save(out, rho)
        print(json.dumps({"ranks": comm.size, "step": best, "field": field, "cells": sim.num_cells, **costs}))


def cells_of(level: int) -> int:
    """Cells of the icosphere of ``level``."""
    return 20 * 4**level


def local_sizes(levels: Sequence[int]) -> list[int]:
    """The sources per rank, ``cells // P``, of the model tables, and :data:`FIXED_POINTS`."""
    return sorted({FIXED_POINTS} | {cells_of(level) // P for level in levels for P in PROCS})


@dataclass
class FieldCosts:
    """Measured seconds of one field evaluation on one core at ``n`` sources and ``1.5 n``
    targets (fixed points), by n, and the degree L of the tolerance rule."""

    seconds: dict[int, float]
    degree: int


def field_costs(tol: float, sizes: Sequence[int], repeats: int, baseline: str | None = None,
                beta: float = 4.0, direct_sums: bool = False) -> dict[str, FieldCosts]:
    """:class:`FieldCosts` of the working tree (``"current"``) and, with ``baseline`` (a git
    revision), of that revision's evaluator, at each n of ``sizes``: best of ``repeats`` rounds
    or more (:data:`ROUND_SECONDS`), the codes interleaved at each n (one n after the other,
    so that a small evaluation is timed as a rank with few cells runs it, not after a
    million-point one evicted the cache).  Random points: a rank's own are a patch of the
    sphere, which costs the same (the direct sums) or slightly less (a NUFFT's spreading)."""
    setup_process()
    from common import interleaved_best

    from meanfield.model import AttentionModel
    from meanfield.nonlocal_field import FastEvaluator

    classes = {"current": partial(FastEvaluator, direct_sums=direct_sums)}
    if baseline is not None:
        from baseline import load_baseline

        classes[baseline] = load_baseline(baseline).FastEvaluator
    rng = np.random.default_rng(0)

    def points(k: int) -> np.ndarray:
        x = rng.standard_normal((k, 3))
        return x / np.linalg.norm(x, axis=1)[:, None]

    seconds: dict[str, dict[int, float]] = {name: {} for name in classes}
    degrees = {}
    for n in sizes:
        y, x, w = points(n), points(3 * n // 2), np.full(n, 1.0 / n)
        calls = {}
        for name, cls in classes.items():
            ev = cls(AttentionModel(3, beta), tol=tol)
            calls[name] = lambda e=ev, x=x, y=y, w=w: e.velocity(x, y, w, fixed_sources=True, fixed_targets=True)
            degrees[name] = max(ev.degrees)
            calls[name]()  # plans the transforms
        first = max(interleaved_best(calls, 1).values())
        rounds = int(np.clip(ROUND_SECONDS / first, repeats, MAX_ROUNDS))  # short calls: more rounds
        for name, t in interleaved_best(calls, rounds).items():
            seconds[name][n] = t
    return {name: FieldCosts(seconds[name], degrees[name]) for name in classes}


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
    """Measured field evaluations and per-cell costs, and the assumptions, of the model step."""

    field: FieldCosts
    transport_per_cell: float  # seconds per cell and step, at P = 1
    ghosts_per_sqrt_cells: float  # ghost cells of a part over sqrt(cells per part), from P = 2
    network: Network
    neighbours: int
    steps_per_output: int

    def terms(self, cells: int, P: int) -> dict[str, float]:
        """Seconds per step of each term at ``cells`` cells on P ranks."""
        net, f = self.network, self.field
        payload = 16 * (f.degree + 3) ** 2 + 8 * 6  # complex coefficients of degree L + 2, and d + 3 sums
        ghosts = self.ghosts_per_sqrt_cells * np.sqrt(cells / P) if P > 1 else 0.0
        exchange = self.neighbours * net.alpha + 8 * ghosts / net.bandwidth if P > 1 else 0.0
        output = net.gather(P, 8 * cells) + OUTPUT_REDUCTIONS * net.allreduce(P, 8)
        return {
            "field local": STAGES * f.seconds[cells // P],
            "coeff Allreduce": STAGES * net.allreduce(P, payload),
            "transport": self.transport_per_cell * cells / P,
            "ghost exchange": STAGES * exchange,
            "CFL + control": (STAGES + 1) * net.allreduce(P, 8),
            "outputs": output / self.steps_per_output,
        }

    def efficiencies(self, level: int, P: int) -> tuple[float, float]:
        """Parallel efficiency (%) of the field and of the whole step at ``level`` on P ranks,
        against one rank at the best rate per cell measured at any n: a rank's cache holds
        more of a small share than of the whole mesh, and that gain is not counted as parallel
        speedup (so P = 1 itself may come out below 100%)."""
        cells = cells_of(level)
        terms = self.terms(cells, P)
        field = sum(terms[k] for k in FIELD_TERMS)
        ideal_field = STAGES * cells * min(t / n for n, t in self.field.seconds.items())
        ideal_step = ideal_field + self.transport_per_cell * cells
        return 100 * ideal_field / (P * field), 100 * ideal_step / (P * sum(terms.values()))

    def table(self, level: int) -> str:
        cells = cells_of(level)
        rows = []
        for P in PROCS:
            terms = self.terms(cells, P)
            field_eff, step_eff = self.efficiencies(level, P)
            rows.append([P, cells // P] + [1e6 * v for v in terms.values()]
                        + [1e3 * sum(terms[k] for k in FIELD_TERMS), field_eff, 1e3 * sum(terms.values()), step_eff])
        header = (["ranks", "cells/rank"] + [f"{k} us" for k in self.terms(cells, 1)]
                  + ["field ms", "field eff %", "step ms", "step eff %"])
        return f"level {level} ({cells} cells), per SSP-RK3 step\n" + table(header, rows)


def measured_runs(args: argparse.Namespace, ranks: list[int], codes: Sequence[str | None]) -> dict:
    """The worker's JSON by (code, ranks), the codes' runs interleaved at each rank count, with
    ``diff``: the densities' largest difference to the same code's one-rank run, relative to
    their largest value."""
    runs, refs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for P in ranks:
            for code in codes:
                out = os.path.join(tmp, f"rho{P}-{code}.npy")
                extra = ["--baseline", code] if code else []
                if args.direct_sums and not code:
                    extra.append("--direct-sums")
                r = run_json([__file__, "--worker", "--level", str(args.level), "--steps", str(args.steps),
                              "--tol", str(args.tol), "--out", out, *extra], ranks=P)
                rho = np.load(out)
                ref = refs.setdefault(code, rho)
                runs[code, P] = {**r, "diff": float(np.abs(rho - ref).max() / np.abs(ref).max())}
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--level", type=int, default=6)
    p.add_argument("--ranks", default=None, help="comma-separated rank counts (default 1..cores)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=7, help="rounds of the interleaved field timings")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--alpha", type=float, default=2e-6, help="assumed latency per message (s)")
    p.add_argument("--bandwidth", type=float, default=1e10, help="assumed network bandwidth (bytes/s)")
    p.add_argument("--neighbours", type=int, default=6, help="assumed ghost-exchange neighbours per rank")
    p.add_argument("--steps-per-output", type=int, default=10, help="steps between outputs in the model")
    p.add_argument("--baseline", default=None, help="git revision whose nonlocal field to measure too")
    p.add_argument("--comm-only", action="store_true", help="skip the scaling table (P = 1, 2 still run)")
    p.add_argument("--direct-sums", action="store_true",
                   help="the working tree with nonlocal.direct_sums = true (rank counts agree to the NUFFT's accuracy)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.level, args.steps, args.tol, args.out, args.baseline, args.direct_sums)
        return
    cores = len(os.sched_getaffinity(0))
    if args.comm_only:
        ranks = [1, 2]
    else:
        ranks = [int(r) for r in args.ranks.split(",")] if args.ranks else list(range(1, cores + 1))
    codes: list[str | None] = [None] + ([args.baseline] if args.baseline else [])
    runs = measured_runs(args, sorted(set(ranks) | {1, 2}), codes)
    names = {code: code or "current" for code in codes}
    print(f"current: the working tree, nonlocal.direct_sums = {str(args.direct_sums).lower()}")
    one, two = runs[None, 1], runs[None, 2]
    if not args.comm_only:
        rows = [[names[code], P, r["step"], 100 * r["field"] / r["step"], runs[code, 1]["step"] / r["step"],
                 100 * runs[code, 1]["step"] / (r["step"] * P), r["diff"]]
                for (code, P), r in runs.items() if P in ranks]
        print(f"strong scaling, FV level {args.level} ({one['cells']} cells), tol {args.tol:g}, {cores} cores present")
        print(table(["code", "ranks", "s/step", "field %", "speedup", "efficiency %", "max |rho - rho_1| / max rho"],
                    rows))
        print()
    costs = field_costs(args.tol, local_sizes(MODEL_LEVELS), args.repeats, args.baseline,
                        direct_sums=args.direct_sums)
    sizes = sorted(costs["current"].seconds)
    print(f"field evaluation at n sources and 1.5 n targets on one core, ms (interleaved, best of >= {args.repeats}; "
          f"n = {FIXED_POINTS}: the work that does not shrink with P)")
    print(table(["n"] + [f"{name} (L = {c.degree})" for name, c in costs.items()],
                [[n] + [1e3 * c.seconds[n] for c in costs.values()] for n in sizes]))
    print()
    transport = (one["step"] - one["field"]) / one["cells"]
    per_sqrt = two["ghosts"] / np.sqrt(two["cells"] / 2)
    print(f"measured at level {args.level}: transport {1e9 * transport:.0f} ns/cell/step (P = 1); P = 2: "
          f"{two['ghosts']} ghost cells per rank, ghost exchange {1e6 * two['exchange']:.1f} us, scalar Allreduce "
          f"{1e6 * two['reduction']:.1f} us, gather to rank 0 {1e3 * two['gather']:.2f} ms; "
          f"densities P = 2 vs 1: {two['diff']:.1e}")
    print(f"model: alpha = {args.alpha:g} s, bandwidth = {args.bandwidth:g} B/s, {args.neighbours} neighbours, "
          f"an output every {args.steps_per_output} steps; {STAGES} field evaluations per step")
    models = {name: StepModel(c, transport, per_sqrt, Network(args.alpha, args.bandwidth), args.neighbours,
                              args.steps_per_output) for name, c in costs.items()}
    for name, model in models.items():
        for level in MODEL_LEVELS:
            print(f"[{name}] {model.table(level)}")
            print()
    print("goals")
    for code in codes:
        field_eff, step_eff = models[names[code]].efficiencies(8, 1024)
        r = runs[code, 2]
        print(f"  {names[code]}: level 8 on 1024 ranks field efficiency {field_eff:.0f}% (goal >= 70%), whole step "
              f"{step_eff:.0f}%; level {args.level} on 2 ranks {r['step']:.4f} s/step (goal <= 0.035), "
              f"densities vs 1 rank {r['diff']:.1e} (goal <= 1e-12)")


if __name__ == "__main__":
    main()

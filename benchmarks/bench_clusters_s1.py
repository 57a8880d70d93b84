"""Accuracy of the cluster analysis on S^1: DG1 runs and quantile particles against a spectral reference.

For each case (softmax, Q = K = V = I, a small multi-mode perturbation of the uniform
density), with no analysis code of its own beyond calling the package:

1. the spectral reference (:func:`meanfield.references.spectral_circle.solve_circle`, 8192 modes,
   outputs every 0.05) up to the first output past 60x uniform (at most t = 10);
2. ``meanfield.run`` of DG1 on 2048 cells (outputs every 0.25), then
   ``meanfield.analysis.clusters.cluster_study(RUN_DIR)`` (what ``meanfield clusters`` calls);
3. ``run_particles`` with ``particles.sampler = "quantile"``, n = 8000, then ``cluster_study``;
4. cluster-by-cluster comparison (:mod:`meanfield.analysis.clusters.compare`): peak positions
   and basin masses at every DG1 output time, crossing times of 2x-50x uniform (global
   maximum and every matched cluster).

Targets: DG1 positions <= 1e-3 rad, masses <= 1e-3, crossing times within 0.5%;
particles within 1e-3 rad of the PDE, cluster by cluster.  Run::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_clusters_s1.py [--out DIR] [--cases example,seed1] [--fv]

``--fv`` adds an FV run on 8192 cells (crossing times only, first order).  Prints a table and
writes ``summary.json`` under ``--out`` (default runs/bench-clusters-s1).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import perturbation
from mpi4py import MPI

import meanfield
from meanfield.analysis.clusters import analyse_spectral, cluster_study, crossing_differences, frame_comparisons
from meanfield.config import load_config
from meanfield.drivers.particles import run_particles
from meanfield.problem import Problem
from meanfield.references.spectral_circle import CircleSolution, solve_circle

BETA = 9.0
MODES = 8192
DT_REF, DT_OUT = 0.05, 0.25
T_CAP, STOP_FACTOR = 10.0, 60.0


CASES = {
    "example": "1 + 0.05*cos(3*arctan2(y, x)) + 0.05*sin(4*arctan2(y, x) + 1) + 0.02*cos(7*arctan2(y, x))",
    "seed1": perturbation(1),
    "seed2": perturbation(2),
    "seed3": perturbation(3),
}


def config(expression: str, t_final: float, cells: int, scheme: str) -> dict:
    return {"name": "bench", "mesh": {"sphere": "S1", "resolution": cells}, "scheme": {"kind": scheme},
            "model": {"attention": "softmax", "beta": BETA},
            "initial": {"kind": "expression", "expression": expression},
            "time": {"t_final": t_final, "outputs": round(t_final / DT_OUT)},
            "particles": {"sampler": "quantile", "n": 8000}, "output": {"xdmf": False}}


def reference(expression: str) -> tuple[CircleSolution, float]:
    """The reference up to the first output time (multiple of DT_OUT) past STOP_FACTOR x uniform."""
    density = Problem(load_config(config(expression, 1.0, 64, "fv"))).initial()
    probe = solve_circle(density, BETA, np.arange(0.0, T_CAP + 1e-9, DT_OUT), modes=MODES)
    above = np.flatnonzero(probe.values.max(axis=1) * 2 * np.pi > STOP_FACTOR)
    t_final = float(probe.times[above[0]] if len(above) else T_CAP)
    return solve_circle(density, BETA, np.round(np.arange(0.0, t_final + 1e-9, DT_REF), 10), modes=MODES), t_final


def worst(comparisons, name: str) -> float:
    return max((c.summary()[name] for c in comparisons if np.isfinite(c.summary()[name])), default=np.nan)


def crossing_error(history, ref, comparisons) -> tuple[float, int]:
    rows = [r for r in crossing_differences(history, ref, comparisons) if np.isfinite(r["relative"])]
    return max((abs(r["relative"]) for r in rows), default=np.nan), len(rows)


def run_case(name: str, expression: str, out: Path, fv: bool) -> dict:
    tic = time.perf_counter()
    solution, t_final = reference(expression)
    ref = analyse_spectral(solution)
    row = {"case": name, "t_final": t_final, "ref_tail": max(solution.tail(i) for i in range(len(solution.times))),
           "clusters": ref.counts.tolist()[::int(DT_OUT / DT_REF)], "reference_s": time.perf_counter() - tic}
    tic = time.perf_counter()
    meanfield.run(config(expression, t_final, 2048, "dg1"), out=out / name / "dg1", comm=MPI.COMM_SELF, quiet=True)
    pde = cluster_study(out / name / "dg1", quiet=True)
    cmp = frame_comparisons(pde, ref)
    row.update(dg1_position=worst(cmp, "position"), dg1_mass=worst(cmp, "mass"), dg1_height=worst(cmp, "height"),
               dg1_unmatched=sum(c.unmatched for c in cmp), dg1_s=time.perf_counter() - tic)
    row["dg1_crossing"], row["crossings"] = crossing_error(pde, ref, cmp)
    tic = time.perf_counter()
    run_particles(config(expression, t_final, 2048, "dg1"), out=out / name / "particles", comm=MPI.COMM_SELF,
                  quiet=True)
    particles = cluster_study(out / name / "particles", quiet=True)
    pcmp = frame_comparisons(particles, pde)
    row.update(particles_position=worst(pcmp, "position"), particles_mass=worst(pcmp, "mass"),
               particles_unmatched=sum(c.unmatched for c in pcmp),
               particles_vs_ref_position=worst(frame_comparisons(particles, ref), "position"),
               particles_s=time.perf_counter() - tic)
    if fv:
        meanfield.run(config(expression, t_final, 8192, "fv"), out=out / name / "fv", comm=MPI.COMM_SELF, quiet=True)
        fv_history = cluster_study(out / name / "fv", quiet=True)
        fcmp = frame_comparisons(fv_history, ref)
        row["fv8192_crossing"] = crossing_error(fv_history, ref, fcmp)[0]
        row["fv8192_position"] = worst(fcmp, "position")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench-clusters-s1")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--fv", action="store_true", help="also FV on 8192 cells (crossing times)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.cases.split(","):
        rows.append(run_case(name, CASES[name], out, args.fv))
        print(json.dumps(rows[-1]), flush=True)
    (out / "summary.json").write_text(json.dumps({"cases": CASES, "rows": rows}, indent=2))
    targets = {"dg1_position": 1e-3, "dg1_mass": 1e-3, "dg1_crossing": 5e-3, "particles_position": 1e-3}
    print(f"\n{'case':8s} {'t_final':>7s} " + " ".join(f"{k:>18s}" for k in targets) + f" {'unmatched':>9s}")
    for r in rows:
        print(f"{r['case']:8s} {r['t_final']:7.2f} " + " ".join(f"{r[k]:18.3e}" for k in targets)
              + f" {r['dg1_unmatched'] + r['particles_unmatched']:9d}")
    ok = all(r[k] <= v for r in rows for k, v in targets.items()) and all(
        r["dg1_unmatched"] == r["particles_unmatched"] == 0 for r in rows)
    limits = ", ".join(f"{k} <= {v:g}" for k, v in targets.items())
    print(f"targets: {limits} -> {'MET' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()

"""The field tolerance against the discretisation error: what the default ``nonlocal.tol`` costs
and changes.

The default case (S^2, three von Mises bumps, softmax, beta = 4, Q = K = V = I) runs to
``--t-final`` with the fast field at each tolerance, per scheme and icosphere level.  Printed
per (scheme, level, tol): wall seconds per step, the relative change of the cell averages
against the run at ``--ref-tol`` (``max |rho_tol - rho_ref| / max rho_ref``), the error
estimate the evaluator recorded, and, per (scheme, level), two yardsticks the field error
should stay far below:

* ``discretisation``: ``max |rho_L - coarsen(rho_{L+1})| / max rho`` at the final time, the
  difference to the next finer level (reference tolerance), transferred conservatively to
  level L -- the size of the scheme's own error at level L;
* ``quadrature``: the field's error from the scheme's source quadrature at t = 0 (the
  velocity at the level-L targets from the level-L source measure against the velocity
  from a level-(L+2) finite-volume measure of the same initial density, relative to its
  maximum).

    python benchmarks/bench_tolerance.py [--quick] [--t-final 1.0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import setup_process, table

TOLS = (1e-10, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3)


def simulation(scheme: str, level: int, tol: float):
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.discrete_pde import DiscretePDE
    from meanfield.problem import Problem

    config = load_config(None, [f"mesh.resolution={level}", f'scheme.kind="{scheme}"',
                                'nonlocal.method="fast"', f"nonlocal.tol={tol}"])
    return DiscretePDE(Problem(config), MPI.COMM_SELF)


def final_density(scheme: str, level: int, tol: float, t_final: float) -> dict:
    """Cell averages at t_final in global cell order, areas, seconds per step, estimate."""
    sim = simulation(scheme, level, tol)
    state, t = sim.state, 0.0
    steps, tic = 0, time.perf_counter()
    while t < t_final - 1e-12:
        state, dt = sim.stepper.step(state, t, t_final)
        t += dt
        steps += 1
    wall = time.perf_counter() - tic
    rho = sim.gather(sim.scheme.cell_averages(state))
    areas = sim.gather(sim.owned_cells()[1])
    return {"rho": rho, "areas": areas, "step": wall / steps, "steps": steps,
            "estimate": sim.evaluator.diagnostics().get("error_estimate")}


def quadrature_error(scheme: str, level: int) -> float:
    """Velocity from the scheme's level-L source measure vs from a level-(L+2) FV measure."""
    from meanfield.nonlocal_field import make_evaluator

    coarse = simulation(scheme, level, 1e-12)
    fine = simulation("fv", level + 2, 1e-12)
    targets = coarse.scheme.velocity_points
    ev = make_evaluator(coarse.problem.model(), None, "fast", 1e-12)
    x, w = coarse.scheme.measure(coarse.state)
    y, v = fine.scheme.measure(fine.state)
    X = ev.velocity(targets, x, w)
    ref = ev.velocity(targets, y, v)
    return float(np.abs(X - ref).max() / np.abs(ref).max())


def main() -> None:
    from meanfield.convergence import coarsen

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="FV levels 4-5, DG1 level 4")
    parser.add_argument("--t-final", type=float, default=1.0)
    parser.add_argument("--ref-tol", type=float, default=1e-12)
    args = parser.parse_args()
    setup_process()
    plan = {"fv": (4, 5) if args.quick else (4, 5, 6), "dg1": (4,) if args.quick else (4, 5)}
    header = ["scheme", "level", "tol", "s/step", "steps", "change vs ref", "estimate",
              "discretisation", "quadrature"]
    rows = []
    for scheme, levels in plan.items():
        for level in levels:
            ref = final_density(scheme, level, args.ref_tol, args.t_final)
            finer = final_density(scheme, level + 1, args.ref_tol, args.t_final)
            coarse, _ = coarsen(finer["rho"][None], finer["areas"], "S2")
            scale = np.abs(ref["rho"]).max()
            disc = float(np.abs(ref["rho"] - coarse[0]).max() / scale)
            quad = quadrature_error(scheme, level)
            rows.append([scheme, level, f"{args.ref_tol:.0e}", ref["step"], ref["steps"], "ref",
                         f"{ref['estimate']:.1e}", disc, quad])
            print(table(header, rows[-1:]).splitlines()[-1], flush=True)
            for tol in TOLS:
                run = final_density(scheme, level, tol, args.t_final)
                change = float(np.abs(run["rho"] - ref["rho"]).max() / scale)
                rows.append([scheme, level, f"{tol:.0e}", run["step"], run["steps"], change,
                             f"{run['estimate']:.1e}", disc, quad])
                print(table(header, rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(header, rows))


if __name__ == "__main__":
    main()

"""Cost of one SSP-RK3 step, DG1 against FV, at an icosphere level (default 5: 20,480 cells).

    python benchmarks/bench_schemes.py [--level 5] [--method direct|fast] [--repeat 3]

Per scheme it prints the time of the transport part of a step (3 rate evaluations and
limiter calls with a prescribed rotation velocity), the time of a step with the attention
field (softmax, beta = 4, the given evaluator), the CFL step of the rotation (rate 1) and the
number of field targets and sources.  The attention field dominates: DG1 evaluates it at
4 targets against 3 sources per cell, FV at 1.5 against 1, and DG1's positivity CFL step is
about a third of FV's.  Best of ``--repeat`` runs; OPENBLAS_NUM_THREADS=1 gives steadier numbers
on a shared machine.  Not a test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _step_time(scheme, state: np.ndarray, repeat: int) -> float:
    from meanfield.timestepping import SSPRK3

    stepper = SSPRK3(scheme, 1.0)
    best = np.inf
    for _ in range(repeat):
        tic = time.perf_counter()
        stepper.step(state, 0.0, 1e-3)
        best = min(best, time.perf_counter() - tic)
    return best


def main() -> None:
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.discretisation.registry import SCHEMES
    from meanfield.mesh import distribute, icosphere
    from meanfield.model import rotation_velocity
    from meanfield.nonlocal_field import make_evaluator
    from meanfield.problem import Problem

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--level", type=int, default=5)
    parser.add_argument("--method", default="direct", help="nonlocal evaluator of the attention step")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    config = load_config({"mesh": {"sphere": "S2"}, "model": {"attention": "softmax", "beta": 4.0}})
    msh = distribute(comm, icosphere(args.level) if comm.rank == 0 else None)
    problem = Problem(config)
    density = problem.initial()
    rows = []
    def attention_velocity(evaluator):
        return lambda x, y, w: evaluator.velocity(x, y, w, fixed_sources=True, fixed_targets=True)

    for name, cls in SCHEMES.items():
        rotation = cls(msh, rotation_velocity(1.0, [0.0, 0.0, 1.0], 3))
        state = rotation.initial_state(density)
        transport = _step_time(rotation, state, args.repeat)
        cfl_dt = 1.0 / rotation.rhs_and_bound(state)[1]
        evaluator = make_evaluator(problem.model(), comm, args.method, 1e-10)
        attention = cls(msh, attention_velocity(evaluator), rotation.geometry)
        field = _step_time(attention, attention.initial_state(density), args.repeat)
        targets = comm.allreduce(len(attention.velocity_points))
        sources = comm.allreduce(len(attention.measure(state)[0]))
        rows.append((name, transport, field, cfl_dt, targets, sources))
    if comm.rank == 0:
        cells = 20 * 4**args.level
        print(f"level {args.level} ({cells} cells), {comm.size} rank(s), attention field: {args.method}")
        print(f"{'scheme':>6} {'transport/step':>15} {'attention/step':>15} {'CFL dt (rot.)':>14} "
              f"{'targets':>9} {'sources':>9}")
        for name, transport, field, dt, targets, sources in rows:
            print(f"{name:>6} {transport * 1e3:12.1f} ms {field:13.3f} s {dt:14.3e} {targets:9d} {sources:9d}")
        (_, t_fv, f_fv, dt_fv, *_), (_, t_dg, f_dg, dt_dg, *_) = rows
        print(f"dg1/fv per step: transport {t_dg / t_fv:.1f}x, attention {f_dg / f_fv:.1f}x; "
              f"per unit time (CFL steps): transport {t_dg / t_fv * dt_fv / dt_dg:.1f}x, "
              f"attention {f_dg / f_fv * dt_fv / dt_dg:.1f}x")


if __name__ == "__main__":
    main()

"""Cost of a causal step (M position slices) against a non-causal step on the same mesh.

    python benchmarks/bench_causal.py [--sphere S2] [--resolution 4] [--scheme fv] [--method fast]
                                      [--slices 64] [--repeat 3]

A causal step evaluates the attention field once per slice and stage (the slices' numerators
and denominators are accumulated as prefix sums, :mod:`meanfield.causal`), so it should cost
about M non-causal steps; the goal of issue 21 is at most M times (64x at M = 64).  Both
steps are SSP-RK3 steps of one fixed dt through the run's own objects
(:class:`meanfield.pde.PDESimulation`), timed alternately, best of ``--repeat``, one thread,
in CPU time of the process (wall time on a machine shared with other jobs varied from 67x to
93x between runs; CPU time from 63x to 71x).
Prints both times, the ratio and the ratio per slice, and the share of the causal step spent
in the field evaluations (the rest: the slices' transport, limiter and the prefix sums).
Not a test.
"""

from __future__ import annotations

import argparse
import time

from common import interleaved_best, setup_process, table


def simulation(args: argparse.Namespace, slices: int | None):
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.pde import PDESimulation
    from meanfield.problem import Problem

    config = {"mesh": {"sphere": args.sphere, "resolution": args.resolution}, "scheme": {"kind": args.scheme},
              "model": {"attention": "softmax", "beta": 4.0}, "nonlocal": {"method": args.method},
              "time": {"dt": 1e-3, "t_final": 1.0}}
    if slices is not None:
        config["model"]["mask"] = "causal"
        config["positions"] = {"slices": slices}
    if args.sphere == "S1":
        config["initial"] = {"kind": "vmf", "centers": [[1.0, 0.0], [-0.5, 0.8]], "kappas": [4.0, 4.0]}
    return PDESimulation(Problem(load_config(config)), MPI.COMM_WORLD)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sphere", default="S2")
    parser.add_argument("--resolution", type=int, default=4)
    parser.add_argument("--scheme", default="fv")
    parser.add_argument("--method", default="fast")
    parser.add_argument("--slices", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup_process()
    plain, causal = simulation(args, None), simulation(args, args.slices)

    def step(sim) -> None:
        sim.stepper.step(sim.state, 0.0, 1e-3)

    best = interleaved_best({"non-causal": lambda: step(plain), "causal": lambda: step(causal)}, args.repeat,
                            time.process_time)
    field_before = causal.velocity.seconds
    tic = time.perf_counter()
    step(causal)
    field_share = (causal.velocity.seconds - field_before) / (time.perf_counter() - tic)
    ratio = best["causal"] / best["non-causal"]
    print(f"{args.sphere} resolution {args.resolution} ({plain.num_cells} cells), {args.scheme}, "
          f"{args.method} field, one thread, CPU seconds")
    print(table(["step", "seconds", "ratio", "ratio / M", "field share"],
                [["non-causal", best["non-causal"], 1.0, "", ""],
                 [f"causal, M = {args.slices}", best["causal"], ratio, ratio / args.slices, f"{field_share:.0%}"]]))
    print(f"causal / non-causal step at M = {args.slices}: {ratio:.1f}x (goal <= {args.slices}x)")


if __name__ == "__main__":
    main()

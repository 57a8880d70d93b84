"""Cost of a causal step (M position slices) against a non-causal step on the same mesh.

    python benchmarks/bench_causal.py [--sphere S2] [--resolution 4] [--scheme fv] [--method fast]
                                      [--slices 64] [--repeat 3]

A causal step evaluates the attention fields of the M slices' measures (the prefix-summed
weights of the slices' measures, which share their points, :mod:`meanfield.masks.causal_slices`) in one
batched evaluation per stage (one transform of all of them, or one matrix product), then moves
all slices at once; the goal is at most 16 non-causal steps at M = 64.  Both
steps are SSP-RK3 steps of one fixed dt through the run's own objects
(:class:`meanfield.discrete_pde.DiscretePDE`), timed alternately, best of ``--repeat``, one thread,
in CPU time of the process (wall time on a machine shared with other jobs varied more).  The
baseline is given twice: the best single non-causal step (a short timing, whose best of a few
is biased low on a busy machine) and the best of M non-causal steps in a row divided by M
(the same amount of work and duration as the causal step).
Prints both times, the ratio and the ratio per slice, the share of the causal step spent in the
field evaluations (the rest: the slices' transport and limiter), and the field's seconds in a
causal step beside those of the cost model ``meanfield check`` uses
(:func:`meanfield.nonlocal_field.auto.estimated_batch_costs`).
Not a test.
"""

from __future__ import annotations

import argparse
import time

from common import interleaved_best, setup_process, table


def simulation(args: argparse.Namespace, slices: int | None):
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.discrete_pde import DiscretePDE
    from meanfield.problem import Problem

    config = {"mesh": {"sphere": args.sphere, "resolution": args.resolution}, "scheme": {"kind": args.scheme},
              "model": {"attention": "softmax", "beta": 4.0}, "nonlocal": {"method": args.method},
              "time": {"dt": 1e-3, "t_final": 1.0}}
    if slices is not None:
        config["model"]["mask"] = "causal"
        config["positions"] = {"slices": slices}
    if args.sphere == "S1":
        config["initial"] = {"kind": "vmf", "centers": [[1.0, 0.0], [-0.5, 0.8]], "kappas": [4.0, 4.0]}
    return DiscretePDE(Problem(load_config(config)), MPI.COMM_WORLD)


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

    def steps(sim, count: int) -> None:
        for _ in range(count):
            sim.stepper.step(sim.state, 0.0, 1e-3)

    best = interleaved_best({"non-causal": lambda: steps(plain, 1), "causal": lambda: steps(causal, 1),
                             "M non-causal": lambda: steps(plain, args.slices)}, args.repeat, time.process_time)
    field_before = causal.velocity.seconds
    tic = time.perf_counter()
    steps(causal, 1)
    field_seconds = causal.velocity.seconds - field_before
    field_share = field_seconds / (time.perf_counter() - tic)
    modelled = modelled_field_seconds(causal, args)
    block = best["M non-causal"] / args.slices
    ratio, ratio_block = best["causal"] / best["non-causal"], best["causal"] / block
    print(f"{args.sphere} resolution {args.resolution} ({plain.num_cells} cells), {args.scheme}, "
          f"{args.method} field, one thread, CPU seconds")
    print(table(["step", "seconds", "causal / this", "/ M", "field share"],
                [["non-causal (best single step)", best["non-causal"], ratio, ratio / args.slices, ""],
                 [f"non-causal (best of {args.slices} in a row, per step)", block, ratio_block,
                  ratio_block / args.slices, ""],
                 [f"causal, M = {args.slices}", best["causal"], 1.0, "", f"{field_share:.0%}"]]))
    print(f"causal / non-causal step at M = {args.slices}: {ratio:.1f}x against the best single step, "
          f"{ratio_block:.1f}x against {args.slices} steps in a row (goal <= 16x at M = 64)")
    print(f"the slices' batched field in a causal step: {field_seconds * 1e3:.3g} ms measured (wall), "
          f"{modelled * 1e3:.3g} ms modelled (meanfield check's model, estimated_batch_costs)")


def modelled_field_seconds(sim, args: argparse.Namespace) -> float:
    """The batched field's seconds in one step of ``sim`` by the cost model ``meanfield check`` uses."""
    from meanfield.drivers.planning import EVALUATIONS_PER_STEP
    from meanfield.nonlocal_field.auto import estimated_batch_costs
    from meanfield.nonlocal_field.fast import FieldPlan

    scheme, layer = sim.scheme, sim.schedule.layers[0]
    plan = FieldPlan.of(layer.attention, sim.problem.field.tol)
    targets, sources = len(scheme.velocity_points), len(scheme.measure(sim.positions.split(sim.state)[0])[0])
    costs = estimated_batch_costs(plan, targets, sources, args.slices,
                                  components=scheme.velocity_components(layer.attention.d))
    return EVALUATIONS_PER_STEP * costs[args.method]


if __name__ == "__main__":
    main()

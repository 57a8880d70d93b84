"""Cost and accuracy of the causal (masked) token field against the non-causal one at the same n.

    python benchmarks/bench_causal_tokens.py [--d 3] [--counts 2000,8000,32000] [--tol 1e-6]
                                             [--block 256] [--direct-max 8000] [--repeat 3]

Tokens uniform on S^{d-1}, softmax, beta = 4, Q = K = V = I, one thread.  Per n, timed
alternately (best of ``--repeat``): one velocity evaluation of the non-causal fast field, of the
causal fast route (prefix harmonic coefficients per block of ``--block`` tokens,
:mod:`meanfield.masks.causal_tokens`) and, up to ``--direct-max`` tokens, of the causal direct route
(blocked masked sums).  Prints the times, the causal/non-causal ratio and, where the direct route
ran, the fast route's error ``max |X_fast - X_direct| / max |X_direct|``.  Not a test.
"""

from __future__ import annotations

import argparse

import numpy as np
from common import interleaved_best, setup_process, table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, default=3)
    p.add_argument("--counts", default="2000,8000,32000")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--direct-max", type=int, default=8000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    setup_process()
    from meanfield.layers import LayerSchedule
    from meanfield.masks.causal_tokens import CausalTokenField
    from meanfield.nonlocal_field import make_evaluator
    from meanfield.particles.sampling import uniform_sphere
    from meanfield.velocity import LayerVelocity

    model = {"beta": 4.0, "attention": "softmax"}
    schedule = LayerSchedule.build(args.d, model)
    noncausal = make_evaluator(schedule.layers[0].attention, None, "fast", args.tol)
    routes = {m: CausalTokenField(LayerVelocity(schedule, None, m, args.tol), None, args.block)
              for m in ("fast", "direct")}
    rows = []
    for n in (int(float(c)) for c in args.counts.split(",")):
        x = uniform_sphere(np.random.default_rng(0), n, args.d)
        w = np.full(n, 1.0 / n)
        calls = {"non-causal fast": lambda x=x, w=w: noncausal.velocity(x, x, w),
                 "causal fast": lambda x=x, w=w: routes["fast"](x, x, w)}
        if n <= args.direct_max:
            calls["causal direct"] = lambda x=x, w=w: routes["direct"](x, x, w)
        best = interleaved_best(calls, args.repeat)
        error = np.nan
        if "causal direct" in calls:
            exact = routes["direct"](x, x, w)
            error = float(np.abs(routes["fast"](x, x, w) - exact).max() / np.abs(exact).max())
        rows.append([n, best["non-causal fast"], best["causal fast"], best["causal fast"] / best["non-causal fast"],
                     best.get("causal direct", np.nan), error])
    print(f"S^{args.d - 1}, tol {args.tol:g}, block {args.block}: seconds per velocity evaluation")
    print(table(["n", "non-causal fast", "causal fast", "ratio", "causal direct", "fast vs direct"], rows))


if __name__ == "__main__":
    main()

"""Fast (harmonic expansion) vs direct nonlocal evaluation: timings and speedups.

Sources = targets = N particles drawn from a non-uniform density on S^1 / S^2 (a normalised
shifted Gaussian, so that the softmax velocity is O(1)), Q = K = V = I, beta = 4, tol = 1e-8.
Direct evaluation at large N would take minutes, so it runs on a subset of the targets and
its time is scaled linearly to all N targets (its cost is exactly linear in the targets).
Fast times are the best of two runs.
the error column compares fast and direct on that subset:
max_i |X_fast - X_direct| / max_i |X_direct|.

Usage: python benchmarks/bench_nonlocal.py [--quick]
On a shared or small machine, ``OPENBLAS_NUM_THREADS=1`` gives far steadier timings (both
methods then run on one core).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from meanfield.model import AttentionModel
from meanfield.nonlocal_field import FastEvaluator, direct_sums

BETA, TOL = 4.0, 1e-8


def particles(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d))
    x[:, -1] += 1.0
    return x / np.linalg.norm(x, axis=1)[:, None]


def timed(fn, repeats: int = 1):
    """Result of ``fn()`` and its best wall time over ``repeats`` calls."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def run(d: int, sizes_both: list[int], sizes_fast: list[int], subset: int) -> None:
    rng = np.random.default_rng(0)
    model = AttentionModel(d, BETA, "softmax")
    degree = FastEvaluator(model, tol=TOL).degrees[0]
    print(f"\nS^{d - 1} (d={d}), beta={BETA}, tol={TOL}, Q=K=V=I, fast degree L={degree}")
    print(f"{'N':>9} {'fast [s]':>9} {'direct [s]':>11} {'speedup':>9} {'err(X)':>9}  note")
    fast_times: dict[int, float] = {}
    for n in sizes_both + sizes_fast:
        x = particles(rng, n, d)
        w = np.full(n, 1.0 / n)
        fast = FastEvaluator(model, tol=TOL)
        vals, t_fast = timed(lambda: fast.evaluate(x, x, w), repeats=2)
        fast_times[n] = t_fast
        if n not in sizes_both:
            print(f"{n:>9} {t_fast:>9.3f} {'-':>11} {'-':>9} {'-':>9}  fast only")
            continue
        m = min(n, subset)
        sub = x[:m]
        ref, t_sub = timed(lambda: direct_sums(model, sub, x, w))
        t_direct = t_sub * n / m
        X = ref.velocity(model, sub)
        Xf = vals.velocity(model, x)[:m]
        err = np.abs(Xf - X).max() / np.abs(X).max()
        note = "direct measured" if m == n else f"direct timed on {m} targets, x{n / m:g}"
        speedup = t_direct / t_fast
        print(f"{n:>9} {t_fast:>9.3f} {t_direct:>11.2f} {speedup:>9.0f} {err:>9.1e}  {note}")
    sizes = sorted(fast_times)
    for a in sizes:
        if 10 * a in fast_times:
            print(f"fast time ratio N={10 * a} / N={a}: {fast_times[10 * a] / fast_times[a]:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    args = parser.parse_args()
    if args.quick:
        both, fast_only, subset = [2_000, 10_000], [20_000, 100_000], 500
    else:
        both, fast_only, subset = [10_000, 30_000, 100_000], [300_000, 1_000_000], 2_000
    for d in (3, 2):
        run(d, both, fast_only, subset)


if __name__ == "__main__":
    main()

"""One nonlocal field evaluation: current fast evaluator vs the baseline (before the transforms) vs direct.

Cases (Q = K = V = I, softmax, beta = 4):

* ``mesh``: icosphere level L (L4..L8) as the finite-volume scheme sees it -- sources at the
  cell centroids with masses from a smooth density, targets at the edge midpoints (1.5 per
  cell), both fixed arrays (``fixed_sources=fixed_targets=True``, plans and caches reused);
  the first (set-up) call is not timed;
* ``tokens``: n tokens (1e4..1e6) from a non-uniform density, both targets and sources, not
  fixed (every call rebuilds what depends on the points, as in a particle RK4 stage).

Per case: seconds per evaluation of the current code (``new``) and of the baseline (``old``,
loaded from git, see ``baseline.py``), their ratio, new nanoseconds per point and transform
(the evaluation's time over ``sources + 2 targets``: one complex NUFFT per source, two per
target and head), the direct sum's nanoseconds per target-source pair (timed on a subset of
targets), and the velocity error of both against the direct sum on that subset
(``max |X - X_direct| / max |X_direct|``).  new and old alternate, best of ``--repeat``.

    python benchmarks/bench_nonlocal.py [--quick] [--tol 1e-6] [--old-tol 1e-10] [--old-max 2e6]
    python benchmarks/bench_nonlocal.py --calibrate      # constants of the auto cost model
    python benchmarks/bench_nonlocal.py --crossover      # auto's choice vs the faster method
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import interleaved_best, setup_process, table

from meanfield.model import AttentionModel
from meanfield.nonlocal_field import FastEvaluator, direct_sums

BETA = 4.0


def mesh_points(level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centroids with masses (a three-bump density) and edge midpoints of icosphere ``level``."""
    from meanfield.mesh import icosphere

    raw = icosphere(level)
    tri = raw.points[raw.cells]
    centroids = tri.mean(axis=1)
    centroids /= np.linalg.norm(centroids, axis=1)[:, None]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    rho = sum(np.exp(2.0 * (centroids @ c)) for c in np.eye(3))
    edges = np.unique(np.sort(np.concatenate([raw.cells[:, [0, 1]], raw.cells[:, [1, 2]], raw.cells[:, [2, 0]]]),
                              axis=1), axis=0)
    mid = raw.points[edges[:, 0]] + raw.points[edges[:, 1]]
    mid /= np.linalg.norm(mid, axis=1)[:, None]
    w = rho * area
    return centroids, w / w.sum(), mid


def tokens(n: int, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d))
    x[:, -1] += 1.0
    return x / np.linalg.norm(x, axis=1)[:, None], np.full(n, 1.0 / n)


def velocity_error(model, values, targets: np.ndarray, ref) -> float:
    X = ref.velocity(model, targets)
    return float(np.abs(values - X).max() / np.abs(X).max())


def case(name: str, model, sources, weights, targets, fixed: bool, args, old_module) -> list:
    """One row: times, ratio, ns per point-transform, direct ns/pair, errors."""
    new = FastEvaluator(model, tol=args.tol)
    old = old_module.FastEvaluator(model, tol=args.old_tol) if targets.shape[0] <= args.old_max else None

    def call(ev):
        return ev.velocity(targets, sources, weights, fixed_sources=fixed, fixed_targets=fixed)

    calls = {"new": lambda: call(new)}
    if old is not None:
        calls["old"] = lambda: call(old)
    if fixed:  # set-up calls (plans, caches) are not part of a step's cost
        for fn in calls.values():
            fn()
    best = interleaved_best(calls, args.repeat)
    m, n = targets.shape[0], sources.shape[0]
    sub = np.linspace(0, m - 1, min(m, args.subset)).astype(int)
    tic = time.perf_counter()
    ref = direct_sums(model, targets[sub], sources, weights)
    pair_ns = (time.perf_counter() - tic) / (sub.size * n) * 1e9
    err_new = velocity_error(model, call(new)[sub], targets[sub], ref)
    err_old = velocity_error(model, call(old)[sub], targets[sub], ref) if old is not None else float("nan")
    t_old = best.get("old", float("nan"))
    per_transform = best["new"] / (n + 2 * m) * 1e9
    direct_eval = pair_ns * 1e-9 * m * n
    return [name, m, n, best["new"], t_old, t_old / best["new"], per_transform, pair_ns,
            direct_eval / best["new"], err_new, err_old]


def calibration_row(d: int, tol: float, N: int = 100_000) -> str:
    """Overhead, per-source, per-target and plan costs of the fast evaluator at one tolerance."""
    rng = np.random.default_rng(1)
    model = AttentionModel(d, BETA)
    y, w = tokens(N, d)
    x = rng.standard_normal((N, d))
    x /= np.linalg.norm(x, axis=1)[:, None]
    few = x[:10]
    cases = {"nn": (x, y, w, True), "n0": (few, y, w, True), "00": (few, y[:10], w[:10], True),
             "unfixed": (x, y, w, False)}
    evs = {k: FastEvaluator(model, tol=tol) for k in cases}

    def call(k):
        t, s, v, fixed = cases[k]
        return lambda: evs[k].velocity(t, s, v, fixed_sources=fixed, fixed_targets=fixed)

    calls = {k: call(k) for k in cases}
    for fn in calls.values():
        fn()
    t = interleaved_best(calls, 5)
    return (f"d={d} tol={tol:.0e} eps={evs['nn'].epsilon:.0e}: overhead {t['00'] * 1e3:.2f} ms, "
            f"source {(t['n0'] - t['00']) / N * 1e9:.1f} ns/pt, target {(t['nn'] - t['n0']) / N * 1e9:.1f} "
            f"ns/pt, unfixed plans {(t['unfixed'] - t['nn']) / N / 2 * 1e9:.1f} ns/pt")


def calibrate() -> None:
    """Per-point costs of the fast evaluator and the direct sum behind auto.py's constants."""
    for d in (2, 3):
        for tol in (1e-4, 1e-6, 1e-8):
            print(calibration_row(d, tol), flush=True)
        x, w = tokens(2000, d)
        tic = time.perf_counter()
        direct_sums(AttentionModel(d, BETA), x, x, w)
        print(f"d={d} direct: {(time.perf_counter() - tic) / 2000**2 * 1e9:.2f} ns/pair")


def crossover() -> None:
    """Small fixed point sets (mesh-like: quasi-uniform sources, 1.5 targets per source): the
    method auto picks against the faster one, measured, for Q = K = I (a spectral head) and for a
    Gaussian Q, K (a random layer's head: the fast field's per-target expansion)."""
    from meanfield.model import Head
    from meanfield.nonlocal_field import AutoEvaluator, DirectEvaluator

    rows = []
    for d, head in ((2, "Q = K = I"), (3, "Q = K = I"), (2, "Gaussian Q, K"), (3, "Gaussian Q, K")):
        model = AttentionModel(d, BETA)
        if head != "Q = K = I":
            Q, K = np.random.default_rng(3).standard_normal((2, d, d)) / np.sqrt(d)
            model = AttentionModel(d, 1.0, heads=(Head(Q, K, np.eye(d)),))
        for n in (25, 50, 100, 200, 400, 800, 1600):
            y, w = tokens(n, d)
            x, _ = tokens(3 * n // 2 + 1, d)
            auto = AutoEvaluator(model, None, 1e-6)
            auto.evaluate(x, y, w, fixed_sources=True, fixed_targets=True)
            evs = {"direct": DirectEvaluator(model), "fast": FastEvaluator(model, tol=1e-6)}
            calls = {k: (lambda ev=ev, x=x, y=y, w=w: ev.velocity(x, y, w, fixed_sources=True, fixed_targets=True))
                     for k, ev in evs.items()}
            for fn in calls.values():
                fn()
            t = interleaved_best(calls, 5)
            faster = min(t, key=t.get)
            rows.append([f"S^{d - 1}", head, n, t["direct"] * 1e3, t["fast"] * 1e3, auto.chosen.name, faster,
                         "yes" if auto.chosen.name == faster else "NO"])
    print(table(["sphere", "head", "sources", "direct ms", "fast ms", "auto picks", "faster", "agree"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="levels 4-6, up to 1e5 tokens")
    parser.add_argument("--tol", type=float, default=1e-6, help="tolerance of the current evaluator")
    parser.add_argument("--old-tol", type=float, default=1e-10, help="baseline tolerance (its default: 1e-10)")
    parser.add_argument("--old-max", type=float, default=2e6, help="largest target count timed for the baseline")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--subset", type=int, default=500, help="targets checked against the direct sum")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--crossover", action="store_true", help="auto's choice at small sizes vs measured")
    args = parser.parse_args()
    setup_process()
    if args.calibrate:
        calibrate()
        return
    if args.crossover:
        crossover()
        return
    from baseline import load_baseline

    old_module = load_baseline()
    model = AttentionModel(3, BETA, "softmax")
    levels = (4, 5, 6) if args.quick else (4, 5, 6, 7, 8)
    counts = (10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000)
    header = ["case", "targets", "sources", "new s", "old s", "old/new", "new ns/pt/transform",
              "direct ns/pair", "direct/new", "err new", "err old"]
    rows = []
    print(f"S^2, Q=K=V=I, softmax, beta={BETA}; new tol {args.tol:g}, old tol {args.old_tol:g}; one thread")
    for level in levels:
        centroids, w, mid = mesh_points(level)
        rows.append(case(f"mesh L{level}", model, centroids, w, mid, True, args, old_module))
        print(table(header, rows[-1:]).splitlines()[-1], flush=True)
    for n in counts:
        x, w = tokens(n)
        rows.append(case(f"tokens {n:.0e}", model, x, w, x, False, args, old_module))
        print(table(header, rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(header, rows))


if __name__ == "__main__":
    main()

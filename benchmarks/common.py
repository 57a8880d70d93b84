"""Helpers shared by the benchmarks: process set-up, interleaved best-of timing, fresh
subprocesses that report JSON (with their peak memory), and table printing.

Benchmarks compare the current code with the field before the transforms (:mod:`baseline`) inside one
run; on a shared machine only those ratios are meaningful, so timings alternate between the
compared implementations and keep the best of several repeats.
"""

from __future__ import annotations

import json
import numbers
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np


def setup_process(baseline: bool = False) -> None:
    """One BLAS/ducc0 thread; the current code also keeps freed memory (as the run drivers
    do at start-up).  The baseline process runs as the code did at the baseline commit."""
    from meanfield.threads import configure_threads, retain_freed_memory

    configure_threads(1)
    if not baseline:
        retain_freed_memory()


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def interleaved_best(calls: dict[str, Callable[[], object]], repeats: int = 3,
                     clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Best time of each callable over ``repeats`` rounds, the callables alternating; wall time,
    or ``clock`` (``time.process_time``: this process's CPU time, steadier on a shared machine
    for a one-thread process)."""
    best = {name: float("inf") for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            tic = clock()
            fn()
            best[name] = min(best[name], clock() - tic)
    return best


def run_json(args: Sequence[str], ranks: int = 1, timeout: float | None = None) -> dict:
    """Run ``python <args>`` (under ``mpirun -n ranks`` when ranks > 1) in a fresh process with
    one thread per rank; return the JSON object of its last output line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MEANFIELD_NUM_THREADS": "1"}
    cmd = [sys.executable, *args]
    if ranks > 1:
        mpirun = os.path.join(os.path.dirname(sys.executable), "mpirun")
        cmd = [mpirun, "-n", str(ranks), *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table (also valid Markdown)."""
    def fmt(c: object) -> str:
        if isinstance(c, str):
            return c
        if isinstance(c, numbers.Integral):
            return str(c)
        return f"{c:.3g}"

    cells = [[str(h) for h in header]] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def perturbation(seed: int, modes: int = 8, amplitude: float = 0.04) -> str:
    """``1 + sum_k a_k cos(k theta + phi_k)``, k = 1..modes, a_k ~ U(0, amplitude), as an expression."""
    rng = np.random.default_rng(seed)
    terms = [f"{a:.4f}*cos({k}*arctan2(y, x) + {p:.4f})"
             for k, a, p in zip(range(1, modes + 1), rng.uniform(0, amplitude, modes),
                                rng.uniform(0, 2 * np.pi, modes))]
    return "1 + " + " + ".join(terms)

"""What ``meanfield validate`` prints: the errors against their prediction per metric and n with
a verdict, the slopes, and the verdict of each metric (or why it has no prediction)."""

from __future__ import annotations

import numpy as np


def _number(value: float, width: int, digits: int = 3) -> str:
    """``value`` in ``width`` characters, ``-`` when it is not a number."""
    return f"{value:>{width}.{digits}g}" if np.isfinite(value) else f"{'-':>{width}s}"


def _ns(row: dict) -> list[int]:
    return [int(k[len("rms_n"):]) for k in row if k.startswith("rms_n")]


def format_errors(summary: list[dict]) -> str:
    """One line per metric and n: the RMS over seeds, the predicted RMS, their ratio, the ratio's
    expected scatter over the seeds and where the ratio falls (the verdict last)."""
    width = max([len("metric"), *(len(s["metric"]) for s in summary)])
    n_width = max([len("n"), *(len(str(n)) for s in summary for n in _ns(s))])
    lines = [f"{'metric':<{width}}  {'n':>{n_width}}  {'RMS':>9}  {'predicted':>9}  {'ratio':>5}  {'scatter':>7}  "
             "verdict"]
    for s in summary:
        for n in _ns(s):
            ratio, low, high = s[f"ratio_n{n}"], s[f"ratio_low_n{n}"], s[f"ratio_high_n{n}"]
            where = "-" if not np.isfinite(ratio) else "above the band" if ratio > high else \
                "below the band" if ratio < low else "inside the band"
            lines.append(f"{s['metric']:<{width}}  {n:>{n_width}d}  {_number(s[f'rms_n{n}'], 9)}  "
                         f"{_number(s[f'predicted_n{n}'], 9)}  {_number(ratio, 5, 2)}  "
                         f"{_number(s[f'ratio_scatter_n{n}'], 7, 2)}  {where}")
    return "\n".join(lines)


def format_slopes(summary: list[dict]) -> str:
    """One line per metric: the slope of log RMS against log n, the seeds' slopes (mean and
    standard deviation) and the PDE floor."""
    width = max([len("metric"), *(len(s["metric"]) for s in summary)])
    lines = [f"{'metric':<{width}}  {'slope':>6}  {'seeds':>13}  {'pde_floor':>9}"]
    for s in summary:
        seeds = f"{s['slope_mean']:.2f} ± {s['slope_std']:.2f}" if np.isfinite(s["slope_mean"]) else "-"
        lines.append(f"{s['metric']:<{width}}  {_number(s['slope_rms'], 6)}  {seeds:>13}  "
                     f"{_number(s['pde_floor'], 9, 2)}")
    return "\n".join(lines)


def format_verdicts(summary: list[dict]) -> str:
    """One line per metric: its verdict, or why it has no prediction."""
    return "\n".join(f"  {s['metric']}: {s['verdict']}" + (f": {s['note']}" if s["note"] else "") for s in summary)


def format_report(summary: list[dict], t: float, seeds: int, band: float) -> str:
    """The three tables of the study at time t, each under a line that says how to read it."""
    ordered = sorted(summary, key=lambda s: s["verdict"] == "no prediction")
    return (f"\nmean-field validation at t = {t:g}: the RMS error over {seeds} seeds against the predicted\n"
            f"sqrt(n_var / n) of the influence functions; ratio = RMS / predicted, about 1 within its scatter\n"
            f"(its standard deviation over the seeds); the band holds {100 * (1 - band):g}% of the ratios of "
            f"particles that agree\nwith the mean-field limit\n{format_errors(ordered)}\n\n"
            f"slopes of log RMS against log n (sampling noise: -0.5; seeds: each seed's slope, mean ± std;\n"
            f"pde_floor: the metric between the PDE at h and h/2)\n{format_slopes(summary)}\n\n"
            f"verdict\n{format_verdicts(ordered)}\n")


def format_table(rows: list[dict]) -> str:
    """Rows of one kind (the cluster agreement) as a narrow aligned table: n as an integer."""
    if not rows:
        return "(no metrics)"
    keys = [k for k in rows[0] if k != "time"]

    def cell(value) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        return f"{value:.3g}" if np.isfinite(value) else "-"

    cells = [[cell(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    align = [str.ljust if isinstance(rows[0][k], str) else str.rjust for k in keys]
    lines = ["  ".join(a(k, w) for a, k, w in zip(align, keys, widths))]
    lines += ["  ".join(a(c, w) for a, c, w in zip(align, row, widths)) for row in cells]
    return "\n".join(lines)

"""The retrieval profile R(t; s0) against source position (:mod:`meanfield.studies.retrieval`).

:func:`retrieval_figure`: one panel per time, one line per mode (the score, mode 0, drawn
thick), with primacy (the first source), recency (the last source) and the interior minimum
(where the profile is U-shaped) marked, the first line's minimum labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure


def split_profiles(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[float, int], tuple[np.ndarray, np.ndarray]]:
    """(t, mode) -> (source positions, values) of retrieval.csv's rows."""
    out: dict[tuple[float, int], tuple[list[float], list[float]]] = {}
    for r in rows:
        s, v = out.setdefault((float(r["t"]), int(r["mode"])), ([], []))
        s.append(float(r["source_position"]))
        v.append(float(r["value"]))
    return {key: (np.array(s), np.array(v)) for key, (s, v) in out.items()}


def interior_minimum(values: np.ndarray) -> int | None:
    """The index of the smallest value when it lies strictly inside (a U-shape), else None."""
    i = int(np.argmin(values))
    return i if 0 < i < len(values) - 1 else None


def retrieval_figure(rows: Sequence[Mapping[str, Any]], *, title: str = "retrieval profile") -> Figure:
    """The profiles of retrieval.csv's rows, one panel per time."""
    profiles = split_profiles(rows)
    times = sorted({t for t, _ in profiles})
    fig = Figure(figsize=(4.0 * len(times) + 0.8, 3.6), layout="constrained")
    axes = fig.subplots(1, len(times), squeeze=False)[0]
    for ax, t in zip(axes, times):
        drawn = 0
        for (tt, mode), (s, v) in sorted(profiles.items()):
            if tt != t:
                continue
            drawn += 1
            label = "score" if mode == 0 else f"mode {mode}"
            (line,) = ax.plot(s, v, lw=2.2 if mode == 0 else 1.2, label=label)
            color = line.get_color()
            ax.plot([s[0]], [v[0]], "^", color=color, ms=7)
            ax.plot([s[-1]], [v[-1]], "v", color=color, ms=7)
            i = interior_minimum(v)
            if i is not None:
                ax.plot([s[i]], [v[i]], "o", color=color, mfc="white", ms=8)
            if i is not None and drawn == 1:  # the score (or the first mode) only: labels would overlap
                ax.annotate(f"min {v[i]:.3g}\nat s0 = {s[i]:.3g}", (s[i], v[i]), textcoords="offset points",
                            xytext=(0, 12), ha="center", fontsize=8, color=color)
        ax.set_title(f"t = {t:g}  (^ primacy, v recency, o minimum)", fontsize=9)
        ax.set_xlabel("source position s0")
        ax.set_xlim(0.0, 1.0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("R(t; s0)")
    axes[-1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return fig

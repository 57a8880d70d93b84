"""The retrieval profile R(t; s0) against source position (:mod:`meanfield.studies.retrieval`).

:func:`retrieval_figure`: one panel per time, one line per profile (DGR's score drawn thick),
with primacy (the first source), recency (the last source) and the interior minimum (where the
profile is U-shaped) marked, the first line's minimum in the panel's title, and DGR's closed
form dashed where the run is its setting.  The y axis says what R(t; s0) is: a covariance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D


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


#: The y axis of the profiles: what R(t; s0) is.
COVARIANCE_LABEL = ("R(t; s0) = N Cov(\N{GREEK SMALL LETTER PSI}(last token, t), "
                    "\N{GREEK SMALL LETTER PHI}(token at s0, 0))")


def retrieval_figure(rows: Sequence[Mapping[str, Any]], *, title: str = "retrieval profile",
                     closed_form: Callable[[float, int, np.ndarray], np.ndarray] | None = None) -> Figure:
    """The profiles of retrieval.csv's rows, one panel per time.

    Each profile is a line named by its ``profile`` (``mode n``, ``pair n: ...``, ``score (M
    codewords)``), the score thick; primacy, recency and the interior minimum are marked and
    explained in the legend, and the first line's minimum is written in the panel's title (not
    beside its marker, where it covered the others).  ``closed_form(t, mode, s0)``, where given
    (DGR's setting), is drawn dashed in each profile's colour.
    """
    profiles = split_profiles(rows)
    names = {int(r["mode"]): str(r.get("profile") or ("score" if int(r["mode"]) == 0 else f"mode {r['mode']}"))
             for r in rows}
    times = sorted({t for t, _ in profiles})
    fig = Figure(figsize=(4.0 * len(times) + 0.8, 3.9), layout="constrained")
    axes = fig.subplots(1, len(times), squeeze=False)[0]
    for ax, t in zip(axes, times):
        heading = f"t = {t:g}"
        for (tt, mode), (s, v) in sorted(profiles.items(), key=lambda item: (item[0][0], item[0][1] != 0, item[0][1])):
            if tt != t:
                continue
            (line,) = ax.plot(s, v, lw=2.2 if mode == 0 else 1.2, label=names[mode])
            color = line.get_color()
            if closed_form is not None:
                fine = np.linspace(s[0], s[-1], 200)
                ax.plot(fine, closed_form(t, mode, fine), "--", color=color, lw=1.0)
            ax.plot([s[0]], [v[0]], "^", color=color, ms=7)
            ax.plot([s[-1]], [v[-1]], "v", color=color, ms=7)
            i = interior_minimum(v)
            if i is not None:
                ax.plot([s[i]], [v[i]], "o", color=color, mfc="white", ms=8)
                if heading == f"t = {t:g}":  # the first profile's minimum, in words
                    heading += f": {names[mode]} min {v[i]:.3g} at s0 = {s[i]:.3g}"
        ax.set_title(heading, fontsize=9)
        ax.set_xlabel("source position s0")
        ax.set_xlim(0.0, 1.0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(COVARIANCE_LABEL, fontsize=8)
    marks = [Line2D([], [], ls="", marker="^", color="0.3", label="primacy (first source)"),
             Line2D([], [], ls="", marker="v", color="0.3", label="recency (last source)"),
             Line2D([], [], ls="", marker="o", mfc="white", color="0.3", label="interior minimum")]
    if closed_form is not None:
        marks.append(Line2D([], [], ls="--", color="0.3", label="closed form (DGR)"))
    handles, _ = axes[-1].get_legend_handles_labels()
    axes[-1].legend(handles=handles + marks, fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig

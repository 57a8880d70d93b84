"""convergence.png: errors at the final time against h (or dt), log-log, with reference slopes,
under a title naming the case, the scheme and the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import DENSITY_NORMS, OBSERVABLE_NORMS, Row
from .ladder import WIDTH_NAMES
from .table import final_rows

#: The ladders' names in titles.
LADDER_NAMES = {"mesh": "mesh", "dt": "time step", "slices": "position slices"}


def width_of(row: Row, axis: str) -> float:
    """The x value of a row: the mesh width h, the step dt, or 1/M on a slices ladder (level M)."""
    if axis == "slices":
        return 1.0 / row.level
    return row.dt if axis == "dt" else row.h


def study_title(case: str, scheme: str, reference: str | Path, axis: str = "mesh") -> str:
    """The figure's title: the case, its scheme, what the errors are measured against, the ladder."""
    against = {"exact": "the exact solution", "finest": "the finest level"}.get(str(reference), f"the run {reference}")
    return f"{case}: scheme {scheme}, errors against {against} ({LADDER_NAMES[axis]} ladder)"


def plot(rows: list[Row], path: Path, axis: str = "mesh", title: str | None = None):
    """Draw the study's final-time errors and save them to ``path`` (``title`` above, from
    :func:`study_title`); returns the Figure."""
    from matplotlib.figure import Figure

    final = final_rows(rows)
    fig = Figure(figsize=(10, 4.4))
    if title is not None:
        fig.suptitle(title, fontsize=10)
    axes = fig.subplots(1, 2)
    for ax, norms in zip(axes, (DENSITY_NORMS, OBSERVABLE_NORMS)):
        xs_all = []
        for norm in norms:
            sel = [r for r in final if r.norm == norm and r.error > 0]
            if sel:
                xs = np.array([width_of(r, axis) for r in sel])
                ax.loglog(xs, [r.error for r in sel], "o-", label=norm)
                xs_all.append((xs, sel[-1].error))
        if xs_all:
            xs, anchor = xs_all[0]
            for slope in (1, 2, 3) if axis == "dt" else (1, 2):
                ax.loglog(xs, anchor * (xs / xs[-1]) ** slope, "k--", lw=0.8, alpha=0.3 + 0.2 * slope)
                ax.annotate(f"slope {slope}", (xs[0], anchor * (xs[0] / xs[-1]) ** slope), fontsize=8)
        ax.set_xlabel(WIDTH_NAMES[axis])
        ax.set_ylabel(f"error at t = {final[0].time:.3g}" if final else "error")
        ax.set_title("density" if norms is DENSITY_NORMS else "observables")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig

"""Observables of a run against time: order parameter, energy, extreme densities, mass drift,
cluster and atom counts, the mass held by atoms and the run's own observables, in a grid of
panels on one time axis; the ends of the layers of a layered model as dotted lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter

# column -> panel title; a panel is drawn when its column is present and not all nan
PANELS = {
    "order": "order parameter |mean|",
    "energy": "energy E",
    "rho_max": "extreme densities",
    "clusters": "clusters",
    "atom_count": "atoms",
    "atom_mass": "mass held by atoms",
    "mass": "mass drift m(t) - m(0)",
}
#: y-axis labels of the panels that have one.
LABELS = {"atom_count": "atom count", "atom_mass": "atom mass"}
#: Counts, drawn as steps.
COUNTS = ("clusters", "atom_count")
#: Panels per row of the grid.
COLUMNS = 3
#: The time axis is logarithmic (t > 0) when the positive output times span at least this factor.
LOG_TIME_SPAN = 100.0
#: The density panel's axis reaches at most this many decades below the peak (a hybrid run's
#: residual density, whose minimum can be 1e-40, would flatten everything else).
DENSITY_DECADES = 6.0
#: Longest expression of one's own observable shown as its panel's y label.
LABEL_CHARACTERS = 40


def log_time(t: np.ndarray) -> bool:
    """Whether the time axis of the panels is logarithmic: the positive times span two decades or more."""
    later = t[t > 0]
    return bool(len(later)) and later.max() >= LOG_TIME_SPAN * later.min()


def _log_time(ax: Axes, t: np.ndarray) -> None:
    """A log time axis labelled with plain numbers: 1, 2, 5 in each decade over a span of
    less than two decades (matplotlib's default then labels every minor tick, overlapping),
    the decades alone over a longer span."""
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    if len(t) and t.max() < 100.0 * t.min():
        ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
    else:
        ax.xaxis.set_minor_formatter(NullFormatter())


def _finite(observables: Mapping[str, np.ndarray], key: str) -> bool:
    return key in observables and bool(np.isfinite(np.asarray(observables[key], float)).any())


def _shown(observables: Mapping[str, np.ndarray], key: str) -> bool:
    """Whether a panel says something: its column has a finite value, and a mass drifts (a
    particle run's mass is exactly conserved, and a panel of zeros is empty)."""
    if not _finite(observables, key):
        return False
    if key == "mass":
        mass = np.asarray(observables[key], float)
        return bool(np.any(mass != mass[0]))
    return True


def panel_grid(fig: Figure, count: int, columns: int = COLUMNS) -> list[Axes]:
    """``count`` panels in rows of ``columns``, sharing the time axis, the last row's panels
    widened to fill it (no empty panel)."""
    columns = min(columns, count)
    rows = -(-count // columns)
    last = count - (rows - 1) * columns
    width = int(np.lcm(columns, last))
    grid = fig.add_gridspec(rows, width)
    axes: list[Axes] = []
    for k in range(count):
        row, place = divmod(k, columns)
        span = width // (last if row == rows - 1 else columns)
        axes.append(fig.add_subplot(grid[row, place * span:(place + 1) * span], sharex=axes[0] if axes else None))
    return axes


def _densities(ax: Axes, t: np.ndarray, observables: Mapping[str, np.ndarray]) -> None:
    """rho max and, where positive, rho min on a log axis reaching at most
    :data:`DENSITY_DECADES` below the peak (rho min below it is left off, and the legend says so)."""
    top = np.asarray(observables["rho_max"], float)
    ax.semilogy(t, top, label="\N{GREEK SMALL LETTER RHO} max")
    peak = float(np.nanmax(top))
    floor = peak * 10.0**-DENSITY_DECADES
    lowest = float(np.nanmin(top[top > 0])) if (top > 0).any() else floor
    if _finite(observables, "rho_min"):
        low = np.asarray(observables["rho_min"], float)
        shown = low > 0
        clipped = bool((low[shown] < floor).any())
        label = "\N{GREEK SMALL LETTER RHO} min" + (f" (off the axis below {floor:.2g})" if clipped else "")
        ax.semilogy(t[shown], low[shown], "--", label=label)
        if shown.any():
            lowest = min(lowest, float(low[shown].min()))
        ax.legend(fontsize=8)
    ax.set_ylim(max(lowest, floor) / 1.5, peak * 1.5)
    ax.set_ylabel("density")


def time_series(observables: Mapping[str, np.ndarray], *, title: str | None = None,
                layer_ends: Sequence[float] = (), own_observables: Mapping[str, str] | None = None) -> Figure:
    """One panel per available observable against t, in a grid of :data:`COLUMNS` columns on
    one time axis (logarithmic, t > 0, when the times span two decades: :func:`log_time`).

    Parameters
    ----------
    observables
        Column name -> (rows,) array; needs "t", uses "order", "energy", "rho_max" (with
        "rho_min" where positive, log scale, at most :data:`DENSITY_DECADES` below the peak),
        "clusters", "atom_count" and "atom_mass" (hybrid runs; the atom mass on [0, total
        mass]), "mass" (its drift from the first output, where it drifts at all), and the
        columns of ``own_observables``.  The last row's panels are widened to fill it (:func:`panel_grid`).
    title
        Figure title.
    layer_ends
        Times where a layer of the model ends and the next begins: a grey dotted line on
        every panel.
    own_observables
        The run's own observables (``[[output.observables]]``): column name -> expression, one
        panel each (the outputs where it was evaluated, joined).
    """
    if "t" not in observables:
        raise ValueError("observables have no column 't'")
    own = {name: text for name, text in (own_observables or {}).items() if _finite(observables, name)}
    keys = [k for k in PANELS if _shown(observables, k)] + list(own)
    if not keys:
        raise ValueError(f"observables have none of the columns {sorted(PANELS)}")
    t = np.asarray(observables["t"], float)
    log = log_time(t)
    shown = t > 0 if log else np.ones(len(t), bool)
    columns = min(COLUMNS, len(keys))
    rows = -(-len(keys) // columns)
    fig = Figure(figsize=(4.0 * columns + 0.4, 3.0 * rows + 0.5), layout="constrained")
    axes = panel_grid(fig, len(keys))
    for ax, key in zip(axes, keys):
        y = np.asarray(observables[key], float)
        if key in COUNTS:
            ax.step(t[shown], y[shown], where="post")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole numbers only
            ax.set_ylim(np.nanmin(y) - 0.5, np.nanmax(y) + 0.5)
        elif key == "rho_max":
            _densities(ax, t, observables)
        elif key == "atom_mass":
            ax.plot(t[shown], y[shown])
            total = np.asarray(observables.get("mass", [1.0]), float)
            ax.set_ylim(0.0, 1.02 * max(float(np.nanmax(total)), float(np.nanmax(y))))
        elif key == "mass":
            ax.plot(t[shown], (y - y[0])[shown])
            ax.ticklabel_format(axis="y", useOffset=False)
        elif key in own:
            due = shown & np.isfinite(y)
            ax.plot(t[due], y[due], ".-" if due.sum() < shown.sum() else "-")
        else:
            ax.plot(t[shown], y[shown])
        for end in layer_ends:
            ax.axvline(end, color="0.5", ls=":", lw=1.0)
        ax.set_title(PANELS.get(key, key))
        if key in own:
            text = own[key]
            ax.set_ylabel(text if len(text) <= LABEL_CHARACTERS else text[:LABEL_CHARACTERS - 3] + "...", fontsize=8)
        elif key in LABELS:
            ax.set_ylabel(LABELS[key])
        ax.grid(alpha=0.3)
    for ax in axes:  # every panel labels its time axis
        ax.set_xlabel("t (log scale)" if log else "t")
    if log:
        _log_time(axes[0], t[shown])  # shared: every panel gets the same axis
    if title:
        fig.suptitle(title)
    return fig

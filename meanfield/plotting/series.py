"""Observables of a run against time: order parameter, energy, extreme densities, mass drift,
cluster and atom counts, and the mass held by atoms; the ends of the layers of a layered model
as dotted lines."""

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
    "rho_max": "extreme densities (log)",
    "clusters": "clusters (log t)",
    "atom_count": "atoms (log t)",
    "atom_mass": "mass held by atoms (log t)",
    "mass": "mass drift m(t) - m(0)",
}
#: y-axis labels of the panels that have one.
LABELS = {"atom_count": "atom count", "atom_mass": "atom mass"}
#: Counts, drawn as steps against log t.
COUNTS = ("clusters", "atom_count")


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


def time_series(observables: Mapping[str, np.ndarray], *, title: str | None = None,
                layer_ends: Sequence[float] = ()) -> Figure:
    """One panel per available observable against t.

    Parameters
    ----------
    observables
        Column name -> (rows,) array; needs "t", uses "order", "energy", "rho_max" (with
        "rho_min" where positive, log scale), "clusters", "atom_count" and "atom_mass"
        (hybrid runs; against log t, t > 0; the atom mass on [0, total mass]), "mass" (its
        drift from the first output).
    title
        Figure title.
    layer_ends
        Times where a layer of the model ends and the next begins: a grey dotted line on
        every panel.
    """
    if "t" not in observables:
        raise ValueError("observables have no column 't'")
    keys = [k for k in PANELS if _finite(observables, k)]
    if not keys:
        raise ValueError(f"observables have none of the columns {sorted(PANELS)}")
    t = np.asarray(observables["t"], float)
    fig = Figure(figsize=(3.4 * len(keys) + 0.4, 3.3), layout="constrained")
    for ax, key in zip(fig.subplots(1, len(keys), squeeze=False)[0], keys):
        y = np.asarray(observables[key], float)
        if key in COUNTS:
            later = t > 0
            ax.step(t[later], y[later], where="post")
            _log_time(ax, t[later])
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        elif key == "rho_max":
            ax.semilogy(t, y, label="\N{GREEK SMALL LETTER RHO} max")
            if _finite(observables, "rho_min"):
                low = np.asarray(observables["rho_min"], float)
                ax.semilogy(t[low > 0], low[low > 0], "--", label="\N{GREEK SMALL LETTER RHO} min")
                ax.legend(fontsize=8)
        elif key == "atom_mass":
            later = t > 0
            ax.plot(t[later], y[later])
            _log_time(ax, t[later])
            total = np.asarray(observables.get("mass", [1.0]), float)
            ax.set_ylim(0.0, 1.02 * max(float(np.nanmax(total)), float(np.nanmax(y))))
        elif key == "mass":
            ax.plot(t, y - y[0])
            ax.ticklabel_format(axis="y", useOffset=False)
        else:
            ax.plot(t, y)
        for end in layer_ends:
            ax.axvline(end, color="0.5", ls=":", lw=1.0)
        ax.set(title=PANELS[key], xlabel="t", ylabel=LABELS.get(key, ""))
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig

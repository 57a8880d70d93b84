"""PNG plots of a validation study (matplotlib Figures: no pyplot, the backend is never changed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .compare import PDEReference
from .prediction import BAND_OUTSIDE

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def half_rate_guide(ns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The line c n^-1/2 through the geometric mean of the positive ``values`` (the least-squares
    fit of a slope -1/2 in log-log), not pinned to the first point."""
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    ok = values > 0
    log_c = float(np.mean(np.log(values[ok]) + 0.5 * np.log(ns[ok]))) if ok.any() else 0.0
    return np.exp(log_c) / np.sqrt(ns)


def plot_errors(path: Path, rows: list[dict], summary: list[dict], t: float) -> Figure:
    """Each metric at time t against n on log-log axes: seeds, RMS over seeds, the n^-1/2 guide
    (:func:`half_rate_guide`), PDE floor, and where the summary has it the predicted RMS
    sqrt(n_var / n) (a line, no fit) with the band where the seeds' RMS falls when the particles
    agree with the mean-field limit, and where the rows have ``<metric>_noise`` (hist_l1) that
    noise level; every n a labelled tick.  Returns the figure it saved."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    names = [s["metric"] for s in summary]
    cols = min(4, len(names))
    nrows = -(-len(names) // cols)
    fig = Figure(figsize=(4 * cols, 3.3 * nrows))
    axes = fig.subplots(nrows, cols, squeeze=False)
    for ax, s in zip(axes.flat, summary):
        sel = [r for r in rows if r["metric"] == s["metric"] and r["time"] == t]
        ax.loglog([r["n"] for r in sel], [max(r["value"], 1e-300) for r in sel], ".", color="0.6", label="seeds")
        ns = np.array(sorted({r["n"] for r in sel}), float)
        rms = np.array([s[f"rms_n{int(n)}"] for n in ns])
        ax.loglog(ns, rms, "o-", label=f"RMS, slope {s['slope_rms']:.2f}")
        ax.loglog(ns, half_rate_guide(ns, rms), "k--", lw=0.8, label="n^-1/2")
        predicted = np.array([s.get(f"predicted_n{int(n)}", np.nan) for n in ns])
        if np.all(np.isfinite(predicted)):
            ax.loglog(ns, predicted, "g-", lw=1.2, label="predicted sqrt(n_var/n)")
            low, high = (np.array([s[f"ratio_{end}_n{int(n)}"] for n in ns]) for end in ("low", "high"))
            ax.fill_between(ns, predicted * low, predicted * high, color="g", alpha=0.15, lw=0,
                            label=f"seeds' {100 * (1 - BAND_OUTSIDE):g}% band")
        noise = sorted((r["n"], r["value"]) for r in rows if r["metric"] == f"{s['metric']}_noise" and r["time"] == t)
        if noise:
            ax.loglog(*zip(*dict(noise).items()), "m-.", lw=1.0, label="iid sampling noise")
        if np.isfinite(s["pde_floor"]) and s["pde_floor"] > 0:
            ax.axhline(s["pde_floor"], color="r", ls=":", label="PDE floor")
        ax.set(title=s["metric"], xlabel="n")
        ax.set_xticks(ns, [f"{n:g}" for n in ns])  # every n labelled (a log axis over < 1 decade labels none)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(summary):]:
        ax.set_visible(False)
    fig.suptitle(f"particles vs PDE at t = {t:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return fig


def plot_density(path: Path, reference: PDEReference, points: np.ndarray, t: float) -> None:
    """PDE density vs the particle histogram (cell mass / cell measure) at time t.

    S^1: both against the angle, the particles binned into about sqrt(n) equal arcs (at most
    one per cell) so the histogram's noise stays readable; S^2: equirectangular scatter of the
    cell centroids, coloured by density, side by side on one colour scale.
    """
    from matplotlib.figure import Figure

    centroids, masses = reference.measure(t)
    areas = reference.coarse.areas
    pde = masses / areas
    if reference.d == 2:
        theta = np.arctan2(centroids[:, 1], centroids[:, 0])
        order = np.argsort(theta)
        bins = int(np.clip(np.sqrt(len(points)), 8, len(theta)))
        edges = np.linspace(-np.pi, np.pi, bins + 1)
        counts, _ = np.histogram(np.arctan2(points[:, 1], points[:, 0]), edges)
        fig = Figure(figsize=(7, 4))
        ax = fig.subplots()
        ax.stairs(counts / (len(points) * np.diff(edges)), edges, lw=0.9,
                  label=f"particles (n = {len(points)}, {bins} bins)")
        ax.plot(theta[order], pde[order], "k", label="PDE")
        ax.set(xlabel="angle", ylabel="density", title=f"t = {t:g}")
        ax.legend()
    else:
        hist = reference.locator.histogram(points) / areas
        lon = np.degrees(np.arctan2(centroids[:, 1], centroids[:, 0]))
        lat = np.degrees(np.arcsin(np.clip(centroids[:, 2], -1.0, 1.0)))
        vmax = max(pde.max(), hist.max())
        fig = Figure(figsize=(12, 3.6))
        axes = fig.subplots(1, 2, sharey=True)
        for ax, values, title in zip(axes, (pde, hist), ("PDE", f"particles (n = {len(points)})")):
            im = ax.scatter(lon, lat, c=values, s=4, vmin=0.0, vmax=vmax, cmap="viridis")
            ax.set(xlabel="longitude", title=f"{title}, t = {t:g}", xlim=(-180, 180), ylim=(-90, 90))
        axes[0].set_ylabel("latitude")
        fig.colorbar(im, ax=list(axes), label="density")
    fig.savefig(path, dpi=100, bbox_inches="tight")

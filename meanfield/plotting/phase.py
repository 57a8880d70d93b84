"""The clustering phase diagram (:mod:`meanfield.studies.phase`): 2312.10794, section 6, remade.

:func:`phase_figure`: one panel per dimension d, the clustered fraction (share of token pairs with
``<x_i, x_j> >= 1 - delta``) as colour over t (horizontal) and beta (vertical), and over it the
curve where the equiangular ODE's ``g_beta(t)`` reaches ``1 - delta``
(:func:`~meanfield.references.equiangular.equiangular_time`), which high-d panels follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..particles.statistics import DELTA


def _edges(values: np.ndarray) -> np.ndarray:
    """Cell edges around sorted centres (midpoints; the ends mirrored)."""
    if len(values) == 1:
        return np.array([values[0] - 0.5, values[0] + 0.5])
    mid = 0.5 * (values[1:] + values[:-1])
    return np.concatenate([[2 * values[0] - mid[0]], mid, [2 * values[-1] - mid[-1]]])


def phase_figure(rows: Sequence[Mapping[str, Any]], *, attention: str = "softmax", delta: float = DELTA,
                 title: str = "clustered fraction") -> Figure:
    """The clustered fraction of phase.csv's rows over (t, beta), one panel per d, with the
    equiangular curve ``g_beta(t) = 1 - delta`` (softmax or unnormalized attention)."""
    from ..attention import attention_kind
    from ..references.equiangular import equiangular_time

    ds = sorted({int(r["d"]) for r in rows})
    betas = np.array(sorted({float(r["beta"]) for r in rows}))
    times = np.array(sorted({float(r["t"]) for r in rows}))
    n = int(rows[0]["n"])
    fig = Figure(figsize=(4.2 * len(ds) + 1.0, 3.8), layout="constrained")
    axes = fig.subplots(1, len(ds), squeeze=False, sharey=True)[0]
    image = None
    fine = np.linspace(betas[0], betas[-1], 200) if len(betas) > 1 else betas
    curve = np.asarray(equiangular_time(1.0 - delta, fine, n, attention, t_max=10 * times[-1] + 1)) \
        if attention_kind(attention).exponential else None
    for ax, d in zip(axes, ds):
        grid = np.full((len(betas), len(times)), np.nan)
        for r in rows:
            if int(r["d"]) == d:
                grid[np.searchsorted(betas, float(r["beta"])), np.searchsorted(times, float(r["t"]))] = \
                    float(r["clustered_fraction"])
        image = ax.pcolormesh(_edges(times), _edges(betas), grid, vmin=0.0, vmax=1.0, cmap="magma", shading="flat")
        if curve is not None:
            shown = curve <= times[-1]
            ax.plot(curve[shown], fine[shown], color="#4fc3f7", lw=1.6,
                    label=f"equiangular ODE: g(t) = 1 - {delta:g}")
        ax.set_title(f"d = {d}")
        ax.set_xlabel("t")
        ax.set_xlim(_edges(times)[0], _edges(times)[-1])
    axes[0].set_ylabel(r"$\beta$")
    if curve is not None:
        axes[-1].legend(loc="lower right", fontsize=8)
    assert image is not None
    fig.colorbar(image, ax=list(axes), label=f"share of pairs with <x_i, x_j> >= {1 - delta:g}")
    fig.suptitle(title, fontsize=10)
    return fig

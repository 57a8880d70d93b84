"""Pictures of a fit (:mod:`meanfield.training.fit`): the loss history, each pair's input,
fitted output and target, and the fitted per-layer weights against depth.

Measures are drawn as densities of equal-area bins, so cells of any mesh and token samples
are drawn alike: on S^1 against the angle theta, on S^2 in the cylindrical equal-area
projection (longitude, z).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

#: Most bins of the pictures: S^1 angle bins; S^2 longitude bins (half as many in z).  A picture
#: has no more bins than its input has cells, so that every bin holds a cell (on S^1 the same
#: number of equal cells).
BINS_S1 = 96
BINS_S2 = 72


def loss_history(iterations: Sequence[float], losses: Sequence[float], grad_norms: Sequence[float]) -> Figure:
    """The loss and the projected gradient's norm against the iteration (log scale)."""
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.semilogy(iterations, np.maximum(losses, 1e-300), "o-", ms=3, label="loss")
    ax.semilogy(iterations, np.maximum(grad_norms, 1e-300), "s--", ms=3, label="gradient norm")
    ax.set_xlabel("L-BFGS-B iteration")
    ax.set_ylabel("value")
    ax.set_title("fit: loss history")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return fig


def controls_picture(t_ends: Sequence[float], controls: Mapping[str, Mapping[int, float]]) -> Figure:
    """Fitted per-layer weights against depth t: each weight (label -> layer index -> value)
    constant over its layer's interval ``[t_end of the layer before, t_end]``."""
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    starts = [0.0, *t_ends[:-1]]
    for label, values in controls.items():
        layers = sorted(values)
        ax.step([starts[k] for k in layers] + [t_ends[layers[-1]]], [values[k] for k in layers] + [values[layers[-1]]],
                where="post", label=label)
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_xlabel("depth t (one constant weight per layer)")
    ax.set_ylabel("fitted weight")
    ax.set_title("fit: fitted weights against depth")
    ax.legend(fontsize=8, ncol=max(1, len(controls) // 6))
    ax.grid(True, alpha=0.3)
    return fig


def _circle(points: np.ndarray, weights: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    edges = np.linspace(-np.pi, np.pi, bins + 1)
    mass, _ = np.histogram(np.arctan2(points[:, 1], points[:, 0]), edges, weights=weights)
    return 0.5 * (edges[1:] + edges[:-1]), mass / np.diff(edges)


def _sphere(points: np.ndarray, weights: np.ndarray, bins: int) -> np.ndarray:
    lon = np.arctan2(points[:, 1], points[:, 0])
    mass, lon_edges, z_edges = np.histogram2d(lon, np.clip(points[:, 2], -1, 1), (bins, max(bins // 2, 1)),
                                              [[-np.pi, np.pi], [-1, 1]], weights=weights)
    return (mass / (np.diff(lon_edges)[:, None] * np.diff(z_edges)[None, :])).T


def pair_picture(input_points: np.ndarray, input_weights: np.ndarray, output_points: np.ndarray,
                 output_weights: np.ndarray, target_points: np.ndarray | None, target_weights: np.ndarray | None,
                 title: str = "") -> Figure:
    """Input, fitted output and target of one pair (a target given as numbers is left out)."""
    measures = [("input", input_points, input_weights), ("fitted output", output_points, output_weights)]
    if target_points is not None and target_weights is not None:
        measures.append(("target", target_points, target_weights))
    if input_points.shape[1] == 2:
        fig = Figure(figsize=(7.0, 4.0), layout="constrained")
        ax = fig.add_subplot()
        for (label, points, weights), style in zip(measures, ("-", "-", "--")):
            theta, density = _circle(points, weights, len(input_points) // -(-len(input_points) // BINS_S1))
            ax.plot(theta, density, style, drawstyle="steps-mid", label=label)
        ax.set_xlabel("theta")
        ax.set_ylabel("density (binned)")
        ax.set_xlim(-np.pi, np.pi)
        ax.legend()
        ax.set_title(title, fontsize=9)
        return fig
    fig = Figure(figsize=(4.2 * len(measures), 3.2), layout="constrained")
    bins = int(np.clip(np.sqrt(len(input_points)), 4, BINS_S2))
    images = [_sphere(points, weights, bins) for _, points, weights in measures]
    top = max(float(img.max()) for img in images)
    for k, ((label, _, _), img) in enumerate(zip(measures, images)):
        ax = fig.add_subplot(1, len(measures), k + 1)
        shown = ax.imshow(img, origin="lower", extent=(-180, 180, -1, 1), aspect="auto", vmin=0, vmax=top,
                          cmap="viridis")
        ax.set_title(label)
        ax.set_xlabel("longitude (degrees)")
        ax.set_ylabel("z")
    fig.colorbar(shown, ax=fig.axes, label="density (binned)")
    fig.suptitle(title, fontsize=9)
    return fig

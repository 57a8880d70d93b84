"""Statistics of a batch of prompts from their tokens' inner products (the phase diagram's).

Per prompt of n tokens, from its Gram matrix ``G_ij = <x_i, x_j>`` (computed on the engine's
device, :func:`gram`, so that only (n, n) numbers per prompt come back to the host):

``mean_inner_product``
    the mean of the off-diagonal ``G_ij``;
``clustered_fraction``
    the share of off-diagonal pairs with ``G_ij >= 1 - delta`` (``delta = 1e-3``: the statistic
    of the figure of 2312.10794, section 6);
``clusters``
    the number of connected groups of the graph ``G_ij >= 1 - 1e-4`` (``MODEL.md``), from the
    graph's transitive closure by repeated squaring: a token in a group of size k adds 1/k.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The clustered fraction counts the pairs with <x_i, x_j> >= 1 - DELTA.
DELTA = 1e-3
#: Tokens with <x_i, x_j> >= 1 - CLUSTER_GAP are joined into one cluster.
CLUSTER_GAP = 1e-4


def gram(xp: Any, x: Any) -> Any:
    """The inner products (P, n, n) of each prompt's tokens, x of shape (P, n, d), in the engine's library."""
    return x @ xp.swapaxes(x, -1, -2)


def cluster_counts(G: np.ndarray, gap: float = CLUSTER_GAP) -> np.ndarray:
    """(P,) the connected groups of each prompt's graph ``G_ij >= 1 - gap``."""
    linked = (np.asarray(G) >= 1.0 - gap).astype(float)
    n = linked.shape[-1]
    linked[..., np.arange(n), np.arange(n)] = 1.0
    for _ in range(max(int(np.ceil(np.log2(max(n, 2)))), 1)):
        linked = (linked @ linked > 0).astype(float)
    return np.rint((1.0 / linked.sum(axis=-1)).sum(axis=-1)).astype(int)


def prompt_statistics(G: np.ndarray, delta: float = DELTA, gap: float = CLUSTER_GAP) -> dict[str, np.ndarray]:
    """Per prompt (module docstring): ``mean_inner_product``, ``clustered_fraction``, ``clusters``."""
    G = np.asarray(G, dtype=float)
    n = G.shape[-1]
    off = ~np.eye(n, dtype=bool)
    pairs = G[:, off]
    return {"mean_inner_product": pairs.mean(axis=1), "clustered_fraction": (pairs >= 1.0 - delta).mean(axis=1),
            "clusters": cluster_counts(G, gap)}

"""Statistics of the pairs of a set of equal-weight tokens on S^{d-1}, any d.

* :func:`mean_inner_product`: the mean of ``<x_i, x_j>`` over the pairs i != j, exactly, from
  the sum of the tokens (``(|sum x|^2 - sum |x_i|^2) / (n (n - 1))``);
* :func:`clustered_fraction`: the share of the pairs i < j with ``<x_i, x_j> >= 1 - delta``
  (the phase diagram's statistic at ``delta = 1e-3``, GLPR 2023 section 6);
* :func:`cluster_count`: the number of clusters, the connected groups of the graph linking
  i and j where ``<x_i, x_j> >= 1 - gap`` (``gap = 1e-4``): a group of identical tokens is one.

The last two look at all pairs up to :data:`PAIR_SAMPLE` tokens; above, at the pairs of a
uniform sample of :data:`PAIR_SAMPLE` tokens without replacement (fixed seed).  The sample's
clustered fraction is a U-statistic of degree 2 with values in [0, 1], so by Hoeffding's
inequality for U-statistics (1963, section 5b) it is within :func:`sampled_error` of the
fraction over all pairs with probability at least 0.95, whatever the tokens; a cluster count
on a sample can miss groups smaller than the sample can see and split a group held together by
a chain, so it is a count of the sample's groups.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..sphere import subsample

#: Tokens whose pairs the pair statistics look at, at most (module docstring).
PAIR_SAMPLE = 2048
#: The clustered fraction's threshold: pairs with ``<x_i, x_j> >= 1 - CLUSTERED_DELTA``.
CLUSTERED_DELTA = 1e-3
#: The cluster count's link: ``<x_i, x_j> >= 1 - CLUSTER_GAP``.
CLUSTER_GAP = 1e-4
#: The probability with which :func:`sampled_error` bounds a sample's error.
CONFIDENCE = 0.95


def mean_inner_product(x: np.ndarray) -> float:
    """The mean of ``<x_i, x_j>`` over the ordered pairs i != j of the rows of ``x`` (nan for one token)."""
    n = len(x)
    if n < 2:
        return float("nan")
    total = x.sum(axis=0)
    return float((total @ total - np.einsum("ij,ij->", x, x)) / (n * (n - 1)))


def sampled_error(sample: int, confidence: float = CONFIDENCE) -> float:
    """The half-width within which the pair share of a sample of ``sample`` tokens lies of the
    share over all pairs with probability ``confidence`` (Hoeffding: ``P(|U - p| >= e) <=
    2 exp(-2 floor(m/2) e^2)``)."""
    return float(np.sqrt(np.log(2.0 / (1.0 - confidence)) / (2 * (sample // 2))))


def _gram(x: np.ndarray, sample: int) -> np.ndarray:
    y = subsample(x, sample)
    return y @ y.T


def _linked_share(gram: np.ndarray, delta: float) -> float:
    m = len(gram)
    if m < 2:
        return float("nan")
    linked = np.count_nonzero(gram >= 1.0 - delta) - np.count_nonzero(np.diag(gram) >= 1.0 - delta)
    return float(linked / (m * (m - 1)))


def _groups(gram: np.ndarray, gap: float) -> int:
    if len(gram) == 0:
        return 0
    count, _ = connected_components(csr_matrix(gram >= 1.0 - gap), directed=False)
    return int(count)


def clustered_fraction(x: np.ndarray, delta: float = CLUSTERED_DELTA, sample: int = PAIR_SAMPLE) -> float:
    """The share of the pairs i < j with ``<x_i, x_j> >= 1 - delta`` (nan for one token); above
    ``sample`` tokens that of a sample's pairs (module docstring)."""
    return _linked_share(_gram(x, sample), delta)


def cluster_count(x: np.ndarray, gap: float = CLUSTER_GAP, sample: int = PAIR_SAMPLE) -> int:
    """The number of connected groups of tokens linked where ``<x_i, x_j> >= 1 - gap``; above
    ``sample`` tokens those of a sample (module docstring)."""
    return _groups(_gram(x, sample), gap)


def pair_observables(x: np.ndarray) -> dict[str, float]:
    """``mean_inner_product``, ``clustered_fraction`` and ``clusters`` of the tokens ``x`` (n, d)."""
    gram = _gram(x, PAIR_SAMPLE)
    return {"mean_inner_product": mean_inner_product(x), "clustered_fraction": _linked_share(gram, CLUSTERED_DELTA),
            "clusters": float(_groups(gram, CLUSTER_GAP))}

"""Token-count-aware defaults for clusters of n tokens: a bandwidth and a noise prominence.

A kernel density estimate of n i.i.d. tokens with the von Mises-Fisher kernel K of bandwidth
h (:mod:`.particles`) has, at a point of density f, the variance ``f R(K) / n`` with
``R(K) = int K^2 = C_d(kappa)^2 / C_d(2 kappa)`` (``kappa = 1/h^2``; about
``kappa / (4 pi)`` on S^2 and ``sqrt(kappa / pi) / 2`` on S^1 for large kappa).  Its relative
standard deviation ``sqrt(R(K) / (n f))`` is largest where f is smallest; at the least height
of a cluster peak (the threshold, the uniform density by default) it is :func:`noise_level`.
A dip between two peaks of the estimate that is shallower than a few times this level is
as likely to be a sampling wiggle as a real saddle, so the default prominence for tokens is
``max(PROMINENCE, NOISE_Z * noise_level)``, but at most :data:`MAX_PROMINENCE`: with a few tokens
the noise level exceeds the peaks themselves, and then only clusters separated by (nearly)
empty space, a dip below 5% of the peak, are told apart.

The default bandwidth is the rule of thumb of a kernel estimate on a manifold of dimension
m = d - 1, ``h = n^(-1/(m + 4)) = n^(-1/(d + 3))`` radians (no smaller than one cell of the
analysis mesh): the bias of a peak's height shrinks like h^2 and the noise like
``(n h^m)^(-1/2)``, and this h balances the two.  For the three broad bumps of
``s2-clustering`` sampled with n = 10^4 tokens it gives h = 0.22 and a prominence of 0.14:
their real dips (2.5% of the peak height) are far below the sampling noise (about 5% of the
density at one bandwidth), so the estimate shows the single significant cluster they form,
not dozens of noise basins.  Clusters whose dips are deeper than the noise (formed clusters,
tight von Mises-Fisher bumps) are each counted.
"""

from __future__ import annotations

import numpy as np

from .particles import kernel_constant

#: Dips shallower than this many relative standard deviations of the estimate are noise.
NOISE_Z = 3.0
#: The largest default prominence (prominences are below 1): a dip to 5% of the peak separates.
MAX_PROMINENCE = 0.95


def token_bandwidth(n: int, d: int, cell_size: float) -> float:
    """Default kernel bandwidth (radians) for n tokens on S^{d-1}: ``max(n^(-1/(d+3)), cell_size)``."""
    return float(max(n ** (-1.0 / (d + 3)), cell_size))


def noise_level(n: int, d: int, bandwidth: float, density: float) -> float:
    """Relative standard deviation of the estimate from n i.i.d. tokens where the density is ``density``."""
    kappa = 1.0 / bandwidth**2
    roughness = kernel_constant(d, kappa) ** 2 / kernel_constant(d, 2.0 * kappa)
    return float(np.sqrt(roughness / (n * density)))


def token_prominence(n: int, d: int, bandwidth: float, threshold: float, floor: float) -> float:
    """Default prominence for n tokens: ``max(floor, NOISE_Z * noise_level(at threshold))``, at
    most :data:`MAX_PROMINENCE`."""
    return float(min(max(floor, NOISE_Z * noise_level(n, d, bandwidth, threshold)), MAX_PROMINENCE))

"""The retrieval profile of causal attention in closed form (Duerinckx, Geshkovski and Rossi).

For iid uniform tokens on S^1 under causal unnormalised attention (Q = K = V = I) with ALiBi
weights normalised over positions (``[positions] decay = lambda``, ``normalise = true``), a
Fourier mode's amplitude obeys the linear Volterra law

    d_t a(s) = a_n int_0^s k_lambda(s, s') a(s') ds',
    k_lambda(s, s') = lambda e^{-lambda (s - s')} / (1 - e^{-lambda s})   (= 1/s at lambda = 0),

with ``a_n = n^2 I_n(beta) / beta`` the mode's non-causal rate (time as in ``meanfield``:
``beta`` times DGR's).  The retrieval profile of the last token,
``R_n(t; s0) = lim_N N Cov(e^{-in theta_N(t)}, e^{in theta_{ceil(N s0)}(0)})``, is the law's
Green's function from s0 to s = 1.  In ``g = e^{lambda s} - 1`` the kernel is ``dg' / g(s)``, so
``K^m delta_{s0}(1) = k_lambda(1, s0) Y^{m-1} / (m-1)!`` with ``Y = log(g(1) / g(s0))``, and the
series sums to

    R_n(t; s0) = k_lambda(1, s0) sqrt(a_n t / Y) I_1( 2 sqrt(a_n t Y) ).

DGR's retrieval score for a vocabulary of M codewords is
``S_t(s0) = sum_{n >= 1} e^{-pi^2 n^2 / (2 M^2)} R_n(t; s0)``.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from .exact import growth_rate

#: Modes summed in the score beyond which the weights e^{-pi^2 n^2 / (2 M^2)} are below 1e-30
#: relative (the R_n stay bounded: a_n falls like 1/n!).
SCORE_CUTOFF = 1e-30


def positional_kernel(s: np.ndarray | float, s_prime: np.ndarray | float, decay: float) -> np.ndarray:
    """``k_lambda(s, s') = lambda e^{-lambda (s - s')} / (1 - e^{-lambda s})`` (``1/s`` at lambda = 0)."""
    s, s_prime = np.asarray(s, float), np.asarray(s_prime, float)
    if decay == 0.0:
        return np.broadcast_to(1.0 / s, np.broadcast(s, s_prime).shape).copy()
    return decay * np.exp(-decay * (s - s_prime)) / -np.expm1(-decay * s)


def log_mass_ratio(s0: np.ndarray | float, decay: float) -> np.ndarray:
    """``Y = log((e^lambda - 1) / (e^{lambda s0} - 1))`` (``log(1/s0)`` at lambda = 0)."""
    s0 = np.asarray(s0, float)
    if decay == 0.0:
        return -np.log(s0)
    return np.log(np.expm1(decay) / np.expm1(decay * s0))


def mode_rate(mode: int, beta: float) -> float:
    """``a_n = n^2 I_n(beta) / beta``, the non-causal rate of Fourier mode n (USA, S^1)."""
    return growth_rate(2, mode, beta, False)


def retrieval_mode(t: float, s0: np.ndarray | float, mode: int, beta: float, decay: float,
                   s: float = 1.0) -> np.ndarray:
    """``R_n(t; s0)`` for source positions ``s0`` in (0, s) (see the module docstring); the
    target position ``s`` (default 1, the last token) replaces 1 in ``k_lambda(1, s0)`` and
    ``Y = log(g(s) / g(s0))``."""
    a, Y = mode_rate(mode, beta) * t, log_mass_ratio(s0, decay) - log_mass_ratio(s, decay)
    root = np.sqrt(a * Y)
    series = np.where(root > 0, np.sqrt(a / np.where(Y > 0, Y, 1.0)) * special.iv(1, 2.0 * root), a)  # -> a as Y -> 0
    return positional_kernel(s, s0, decay) * series


def codeword_weights(codewords: int, modes: int) -> np.ndarray:
    """``e^{-pi^2 n^2 / (2 M^2)}`` for n = 1..modes."""
    n = np.arange(1, modes + 1)
    return np.exp(-(np.pi**2) * n**2 / (2.0 * codewords**2))


def score_modes(codewords: int, cutoff: float = SCORE_CUTOFF) -> int:
    """How many modes the score sums: those whose weight is above ``cutoff``."""
    return int(np.ceil(codewords * np.sqrt(2.0 * -np.log(cutoff)) / np.pi))


def retrieval_score(t: float, s0: np.ndarray | float, beta: float, decay: float, codewords: int) -> np.ndarray:
    """DGR's retrieval score ``S_t(s0) = sum_n e^{-pi^2 n^2 / (2 M^2)} R_n(t; s0)``."""
    modes = score_modes(codewords)
    weights = codeword_weights(codewords, modes)
    return sum(w * retrieval_mode(t, s0, n, beta, decay) for n, w in enumerate(weights, start=1))

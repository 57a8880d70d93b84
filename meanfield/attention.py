"""Attention kinds: the kernel that weighs the sources and how the sums N and Z make a velocity.

Pure numpy, below the model.  An attention kind is one class that registers itself under its
config name (``model.attention``) when it is defined, as py-pde's solvers and Dedalus's
time steppers do: :func:`attention_kind` finds it, :func:`attention_names` lists the
registered names (the config schema's choices), and a kind defined outside the package (a
test's, a user's) is a choice as soon as its class is defined.  With the kernel
``k(s)`` of the logits ``s = beta <Q_h x, K_h y>`` the sums of a measure are

    N_h(x) = int k(s) V_h y dmu(y),   Z_h(x) = int k(s) dmu(y),

kept scaled by ``exp(-log_scale)`` (target by target) so that an exponential kernel does not
overflow.  A kind owns

- its kernel on a block of logits (:meth:`Attention.weights`, masked entries ``-inf``), used by
  the tokens' masked sums, and its tiled sums (:meth:`Attention.kernel_sums`), used by the
  direct field and the adjoint's sums;
- how N and Z make the velocity (:meth:`Attention.factor`: ``P_x(N/Z)`` normalised,
  ``P_x(N)`` not) and the bounds of speed and Lipschitz constant that follow;
- the linearisation of that combination: the first-order change of the velocity under a
  change of the sums (:meth:`Attention.first_order_change`, the fast field's error
  estimate) and the adjoint's sources at the facets (:meth:`Attention.facet_terms`,
  :meth:`Attention.adjoint_sources`, :mod:`meanfield.adjoint`).

The causal mask's prefix sums (:class:`~meanfield.masks.causal_slices.PrefixSums`) add slices'
and blocks' sums at a common scale, which any kind's scaled sums allow.  Exponential kinds
(``exp(s)``: softmax and unnormalised) also admit the fast field's expansions and the exact
references; other kernels are evaluated by direct sums.  "Adding a variant" in the docs walks through a new kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

#: The registered attention kinds by config name, in the order they were defined.
_KINDS: dict[str, Attention] = {}


def attention_kind(name: str) -> Attention:
    """The registered attention kind called ``name`` (``KeyError`` for an unknown name)."""
    return _KINDS[name]


def attention_names() -> tuple[str, ...]:
    """The names of the registered attention kinds (the choices of ``model.attention``)."""
    return tuple(_KINDS)


def _ratio(shift: np.ndarray, common: np.ndarray) -> np.ndarray:
    """``exp(shift - common)``, 0 where ``shift`` is ``-inf`` (no sources yet)."""
    return np.exp(np.where(np.isfinite(shift), shift - np.where(np.isfinite(common), common, 0.0), -np.inf))


class Attention(ABC):
    """An attention kind; a subclass with a ``name`` registers itself (see the module docstring).

    This base class combines the sums as unnormalised attention does, ``X = sum_h w_h P_x(N_h)``;
    a normalised kind overrides :meth:`factor` and the linearisation.
    """

    #: The config name (``model.attention``); a class without one is not registered.
    name: ClassVar[str] = ""
    #: Whether the kernel is ``exp(s)`` (the fast field's expansions and the exact references apply).
    exponential: ClassVar[bool] = False
    #: Whether the velocity is ``P_x(N/Z)`` (for the exact references' closed forms).
    normalised: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            _KINDS[cls.name] = cls()

    @abstractmethod
    def weights(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The kernel at ``logits`` (m, n) (``-inf``: a masked pair), row i scaled by
        ``exp(-shift_i)``: returns the weights (m, n) and the shifts (m,)."""

    def kernel_sums(self, a: np.ndarray, b: np.ndarray, rhs: np.ndarray, block_targets: int = 256,
                    block_sources: int = 2048) -> tuple[np.ndarray, np.ndarray]:
        """``sum_j k(<a_i, b_j>) rhs_j`` for every row ``a_i``, scaled by ``exp(-log_scale_i)``.

        Parameters
        ----------
        a, b
            Shapes (m, k) and (n, k): the logit of target i and source j is ``<a_i, b_j>``.
        rhs
            Shape (n, c): the sources' columns to sum.
        block_targets, block_sources
            Tile sizes; memory use is about ``8 * block_targets * block_sources`` bytes.

        Returns
        -------
        sums, log_scale
            Shapes (m, c) and (m,) (``log_scale`` is ``-inf`` without sources).
        """
        m, n = a.shape[0], b.shape[0]
        out = np.zeros((m, rhs.shape[1]))
        log_scale = np.full(m, -np.inf)
        for i0 in range(0, m, block_targets):
            rows = slice(i0, min(i0 + block_targets, m))
            for j0 in range(0, n, block_sources):
                cols = slice(j0, min(j0 + block_sources, n))
                W, shift = self.weights(a[rows] @ b[cols].T)
                common = np.maximum(log_scale[rows], shift)
                out[rows] = out[rows] * _ratio(log_scale[rows], common)[:, None] \
                    + _ratio(shift, common)[:, None] * (W @ rhs[cols])
                log_scale[rows] = common
        return out, log_scale

    def factor(self, weight: float, Z: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
        """The factor (targets,) of a head's scaled N in its velocity ``P_x(factor N)``, for the
        head's weight, scaled Z and shift: ``weight exp(log_scale)`` (unnormalised)."""
        return weight * np.exp(log_scale)

    def kernel_bound(self, logit: float) -> float:
        """``max k(s)`` over ``|s| <= logit``, for an increasing kernel ``k(logit)``."""
        W, shift = self.weights(np.array([[logit]]))
        return float(W[0, 0] * np.exp(shift[0]))

    def speed_factor(self, logit: float) -> float:
        """``|X_h| <= |w_h| ||V_h|| speed_factor(beta ||Q_h^T K_h||)`` for a probability measure:
        the kernel's largest value (unnormalised: N is an integral of the kernel against mu)."""
        return self.kernel_bound(logit)

    def first_order_change(self, N: np.ndarray, Z: np.ndarray, dN: np.ndarray, dZ: np.ndarray,
                           log_scale: np.ndarray) -> np.ndarray:
        """The change (targets, d) of ``factor N`` (unit weight, before the projection) to first
        order when the scaled sums N (targets, d), Z change by dN, dZ (same scale)."""
        return np.exp(log_scale)[:, None] * dN

    def transform_change(self, norm_V: float, epsilon: float, G: np.ndarray, F: np.ndarray,
                         log_scale: np.ndarray | float) -> np.ndarray:
        """A bound of the velocity's change (targets,) from errors of ``epsilon`` relative to
        the local ``|G|`` and ``F`` in the scaled sums ``N = V G``, ``Z = F``."""
        return norm_V * epsilon * G * np.exp(log_scale)

    def facet_terms(self, N: np.ndarray, Z: np.ndarray,
                    log_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """What the adjoint keeps of the sums at the facets (heads, F, ...) to linearise the
        combination; ``None`` when the velocity is linear in N and Z ignores it."""
        return None

    def adjoint_sources(self, weights: np.ndarray, a: np.ndarray,
                        terms: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray | None]:
        """The adjoint sums' vector sources (M, H, F, d, P) and scalar sources (M, H, F, P) or
        ``None`` for the heads' ``weights`` (H,), the tangent vectors ``a`` (M, F, d, P) and the
        stacked :meth:`facet_terms` of the M slices (:mod:`meanfield.adjoint.sums`)."""
        shape = (a.shape[0], len(weights)) + a.shape[1:]
        return weights[None, :, None, None, None] * np.broadcast_to(a[:, None], shape), None


class Exponential(Attention, ABC):
    """The kernel ``exp(s)``, shifted by each row's largest logit (online, tile by tile)."""

    exponential = True

    def weights(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        top = logits.max(axis=1)
        return np.exp(logits - top[:, None]), top

    def kernel_sums(self, a: np.ndarray, b: np.ndarray, rhs: np.ndarray, block_targets: int = 256,
                    block_sources: int = 2048) -> tuple[np.ndarray, np.ndarray]:
        return exp_sums(a, b, rhs, block_targets, block_sources)

    def kernel_bound(self, logit: float) -> float:
        return float(np.exp(logit))


class Softmax(Exponential):
    """Softmax attention (SA): ``X = sum_h w_h P_x(N_h / Z_h)``; a head that sees no mass gives 0."""

    name = "softmax"
    normalised = True

    def factor(self, weight: float, Z: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = weight / Z
        out[~(Z > 0)] = 0.0  # no mass seen (or not a number): no velocity
        return out

    def speed_factor(self, logit: float) -> float:
        """1: ``P_x V`` of a convex combination of unit vectors."""
        return 1.0

    def first_order_change(self, N: np.ndarray, Z: np.ndarray, dN: np.ndarray, dZ: np.ndarray,
                           log_scale: np.ndarray) -> np.ndarray:
        safe = np.where(Z > 0, Z, np.inf)[:, None]
        return (dN - N / safe * dZ[:, None]) / safe

    def transform_change(self, norm_V: float, epsilon: float, G: np.ndarray, F: np.ndarray,
                         log_scale: np.ndarray | float) -> np.ndarray:
        safe = np.where(F > 0, F, np.inf)
        return np.where(F > 0, 2.0 * norm_V * epsilon * G / safe, np.inf)

    def facet_terms(self, N: np.ndarray, Z: np.ndarray,
                    log_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``1/Z`` (unscaled) and ``N/Z`` per head at the facets."""
        unscaled = np.exp(log_scale) * Z
        inverse_Z = np.divide(1.0, unscaled, out=np.zeros_like(unscaled), where=unscaled > 0)
        return inverse_Z, N * np.divide(1.0, Z, out=np.zeros_like(Z), where=Z > 0)[..., None]

    def adjoint_sources(self, weights: np.ndarray, a: np.ndarray,
                        terms: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray | None]:
        """``b = w a / Z``, ``c = w a . N / Z^2`` (MODEL.md "Beyond the limit")."""
        assert terms is not None
        inverse_Z, ratio = terms
        vectors = weights[None, :, None, None, None] * inverse_Z[:, :, :, None, None] * a[:, None]
        return vectors, np.einsum("khfdp,khfd->khfp", vectors, ratio)


class Unnormalised(Exponential):
    """Unnormalised attention (USA): ``X = sum_h w_h P_x(N_h)``."""

    name = "unnormalized"


def exp_sums(a: np.ndarray, b: np.ndarray, rhs: np.ndarray, block_targets: int = 256,
             block_sources: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """``sum_j exp(<a_i, b_j>) rhs_j`` for every row ``a_i``, scaled by ``exp(-max_j <a_i, b_j>)``.

    An online log-sum-exp: each target keeps the running maximum of its exponent and the
    accumulated sums are rescaled whenever it grows (as in streaming softmax).  Arguments and
    results as :meth:`Attention.kernel_sums`.
    """
    m, n = a.shape[0], b.shape[0]
    out = np.zeros((m, rhs.shape[1]))
    log_scale = np.full(m, -np.inf)
    if n == 0 or m == 0:
        return out, log_scale
    tile = np.empty((min(block_targets, m), min(block_sources, n)))
    for i0 in range(0, m, block_targets):
        i1 = min(i0 + block_targets, m)
        acc = np.zeros((i1 - i0, rhs.shape[1]))
        run_max = np.full(i1 - i0, -np.inf)
        for j0 in range(0, n, block_sources):
            j1 = min(j0 + block_sources, n)
            E = tile[: i1 - i0, : j1 - j0]
            np.matmul(a[i0:i1], b[j0:j1].T, out=E)
            new_max = np.maximum(run_max, E.max(axis=1))
            acc *= np.exp(run_max - new_max)[:, None]
            np.subtract(E, new_max[:, None], out=E)
            np.exp(E, out=E)
            acc += E @ rhs[j0:j1]
            run_max = new_max
        out[i0:i1] = acc
        log_scale[i0:i1] = run_max
    return out, log_scale

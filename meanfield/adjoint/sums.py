"""The nonlocal term of the adjoint: attention-type sums with Q and K exchanged.

The linearised velocity of a perturbation ``nu`` of the measure at a facet point ``m`` is
``dX(m) = int D(m, x) dnu(x)`` with (per head h, weight w_h; MODEL.md "Beyond the limit")

    USA:  D(m, x) = w_h P_m exp(beta <Q m, K x>) V x,
    SA:   D(m, x) = w_h P_m exp(beta <Q m, K x>) (V x - N(m)/Z(m)) / Z(m)

(another attention kind: its kernel in place of exp, and its
:meth:`~meanfield.attention.Attention.adjoint_sources` below).

Its adjoint, paired with tangent vectors ``a_e`` at the facet points ``m_e``, is the function

    G(x) = sum_h [ S_h(x) . V_h x - s_h(x) ],   [S_h, s_h](x) = sum_e exp(beta <Q_h m_e, K_h x>) [b_e, c_e],

with vector sources ``b_e`` and scalar sources ``c_e`` (USA: ``b = w_h a``, ``c = 0``; SA:
``b = w_h a / Z(m)``, ``c = w_h a . N(m) / Z(m)^2``): an attention sum whose sources are the
facet points and whose targets are the cells, the roles of Q and K exchanged.
:class:`AdjointSums` evaluates it with the run's ``[nonlocal]`` method, all columns at once,
as kernel sums of the exchanged single-head model whose sources' values are linear in the
target (:meth:`~meanfield.nonlocal_field.base.NonlocalEvaluator.linear_sums`): for ``direct``
one pass of matrix products over the sources gathered from the ranks; for ``fast`` one
adjoint transform of the ``(d + 1) x columns`` source measures (two to a complex NUFFT), the
sum over the components taken on the coefficients, and one synthesis of ``columns``
functions.  A kind whose kernel is not exp (the evaluators expand exp) is summed directly with
its own :meth:`~meanfield.attention.Attention.kernel_sums`.
"""

from __future__ import annotations

import numpy as np

from ..model import AttentionModel, Head
from ..nonlocal_field import NonlocalEvaluator, make_evaluator
from ..nonlocal_field.parallel import allgather_rows


class AdjointSums:
    """``G(x)`` of the module docstring for one attention model, at fixed targets from fixed sources.

    Parameters
    ----------
    model
        The attention model of the layer.
    comm
        MPI communicator over which the sources (facet points) are distributed.
    method, tol, direct_sums
        The run's ``[nonlocal]`` settings.
    """

    def __init__(self, model: AttentionModel, comm=None, method: str = "direct", tol: float = 1e-10,
                 direct_sums: bool = False) -> None:
        # the fast field expands exp: other kernels are summed directly
        self.model, self.comm, self.method = model, comm, method if model.kind.exponential else "direct"
        eye = np.eye(model.d)
        # the evaluators sum the exp kernel; another kind's kernel is summed here, directly
        self.evaluators: list[NonlocalEvaluator] = [] if not model.kind.exponential else [
            make_evaluator(AttentionModel(model.d, model.beta, "unnormalized", (Head(h.K, h.Q, eye, 1.0),)),
                           comm, method, tol, direct_sums) for h in model.heads]

    def __call__(self, targets: np.ndarray, sources: np.ndarray, vectors: np.ndarray,
                 scalars: np.ndarray | None) -> np.ndarray:
        """``G`` at this rank's targets (m, d) from this rank's sources (n, d) (collective).

        Parameters
        ----------
        targets, sources
            The same arrays at every call (the cells' and the facets' points).
        vectors
            (heads, n, d, P): the vector sources ``b_e`` of each head and column.
        scalars
            (heads, n, P): the scalar sources ``c_e`` (``None``: zero, USA).

        Returns
        -------
        (m, P) the values of ``G`` for every column.
        """
        out = np.zeros((targets.shape[0], vectors.shape[-1]))
        for h, head in enumerate(self.model.heads):
            if self.evaluators:
                out += self.evaluators[h].linear_sums(targets, sources, vectors[h],
                                                      None if scalars is None else scalars[h], head.V,
                                                      fixed_sources=True, fixed_targets=True)[0]
            else:
                out += self._kernel_sums(head, targets, sources, vectors[h], None if scalars is None else scalars[h])
        return out

    def _kernel_sums(self, head: Head, targets: np.ndarray, sources: np.ndarray, vectors: np.ndarray,
                     scalars: np.ndarray | None) -> np.ndarray:
        """``sum_e k(beta <Q m_e, K x>) (<V x, b_e> - c_e)`` at the targets (m, P) with the kind's
        kernel ``k``, the sources and their columns gathered over the ranks."""
        n, d, P = vectors.shape
        columns = vectors.reshape(n, d * P)
        if scalars is not None:
            columns = np.concatenate([columns, scalars], axis=1)
        every = allgather_rows(self.comm, np.ascontiguousarray(sources))
        sums, log_scale = self.model.kind.kernel_sums(targets @ head.K.T, self.model.beta * (every @ head.Q.T),
                                                      allgather_rows(self.comm, np.ascontiguousarray(columns)))
        sums = sums * np.exp(np.where(np.isfinite(log_scale), log_scale, 0.0))[:, None]
        out = np.einsum("mdp,md->mp", sums[:, : d * P].reshape(-1, d, P), targets @ head.V.T)
        if scalars is not None:
            out -= sums[:, d * P:]
        return out

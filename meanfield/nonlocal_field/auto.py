"""Automatic choice between the direct and the fast evaluator, by a cost model.

Costs in seconds, on one core, for ``H`` heads, ``m`` targets and ``n`` sources in total:

    direct ~ C_DIRECT * H * m * n
    fast   ~ C_FAST * (H * m + n) * (basis_size(d, L + 1) + FAST_ROW_OFFSET) + FAST_OVERHEAD

(``L`` the fast evaluator's largest degree).  The constants were calibrated roughly on a
2-core AMD EPYC (no AVX-512), single-threaded BLAS, with ``benchmarks/bench_nonlocal.py``: direct ~8 ns
per target-source pair (float64 ``exp`` dominates); fast ~5-6 ns per point and basis row
(N = 1e6 on S^2 at L = 15: 3.1 s; on S^1 at L = 14: 1.0 s), the offset standing for the
per-point work that does not scale with the basis (kernel coefficients, rotations).  Only the ratio matters, and the
crossover is not sharp: at small sizes both take milliseconds.
"""

from __future__ import annotations

import numpy as np

from ..model import AttentionModel
from .base import FieldValues, NonlocalEvaluator
from .direct import DirectEvaluator
from .fast import FastEvaluator
from .harmonics import SUPPORTED_DIMENSIONS, basis_size
from .parallel import allreduce_sum

C_DIRECT = 8e-9
C_FAST = 6e-9
FAST_ROW_OFFSET = 60
FAST_OVERHEAD = 2e-3


def estimated_costs(fast: FastEvaluator, n_targets: int, n_sources: int) -> dict[str, float]:
    """Modelled seconds of one evaluation by each method (totals over all ranks)."""
    H = len(fast.model.heads)
    rows = basis_size(fast.model.d, fast.moment_degree) + FAST_ROW_OFFSET
    return {
        "direct": C_DIRECT * H * n_targets * n_sources,
        "fast": C_FAST * (H * n_targets + n_sources) * rows + FAST_OVERHEAD,
    }


class AutoEvaluator(NonlocalEvaluator):
    """Decides at the first :meth:`evaluate` between direct and fast, then keeps the choice.

    The decision uses the global numbers of targets and sources (one small ``Allreduce``),
    so every rank makes the same one.  Models with ``d`` other than 2 or 3 always use direct.
    """

    name = "auto"

    def __init__(self, model: AttentionModel, comm=None, tol: float = 1e-10) -> None:
        super().__init__(model, comm)
        self.tol = float(tol)
        self.chosen: NonlocalEvaluator | None = None
        self._costs: dict[str, float] | None = None

    def _choose(self, n_targets: int, n_sources: int) -> NonlocalEvaluator:
        if self.model.d not in SUPPORTED_DIMENSIONS:
            return DirectEvaluator(self.model, self.comm)
        counts = allreduce_sum(self.comm, np.array([n_targets, n_sources], dtype=float))
        fast = FastEvaluator(self.model, self.comm, self.tol)
        self._costs = estimated_costs(fast, int(counts[0]), int(counts[1]))
        if self._costs["fast"] < self._costs["direct"]:
            return fast
        return DirectEvaluator(self.model, self.comm)

    def evaluate(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        weights: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> FieldValues:
        """See :meth:`NonlocalEvaluator.evaluate`; the first call fixes the method."""
        if self.chosen is None:
            self.chosen = self._choose(targets.shape[0], sources.shape[0])
        return self.chosen.evaluate(
            targets, sources, weights, fixed_sources=fixed_sources, fixed_targets=fixed_targets
        )

    def diagnostics(self) -> dict:
        """The chosen evaluator's diagnostics, plus the modelled costs behind the choice."""
        if self.chosen is None:
            return {"method": self.name, "selected": None}
        out = dict(self.chosen.diagnostics())
        out.update(selected_by=self.name, modelled_costs_s=self._costs)
        return out

"""Automatic choice between the direct and the fast evaluator, by a cost model.

Modelled seconds of one evaluation on one core, for ``n`` sources and ``m`` targets in total
(all ranks), ``H`` heads of which ``H_s`` are spectral (transform route of :mod:`.fast`):

    direct ~ DIRECT_OVERHEAD + C_DIRECT * H * m * n
    fast   ~ FAST_OVERHEAD[d] + n * c_source + m * (H_s * c_target + H_e * c_expansion)

with ``c_source = a + b lg(1/eps)`` and ``c_target = a' + b' lg(1/eps)`` (:data:`SOURCE_NS`,
:data:`TARGET_NS`; ``eps`` the NUFFT accuracy, ``lg`` = log10), :data:`PLAN_NS` more per point
of a group that is not fixed (its NUFFT plan is rebuilt every call), and for heads whose
concentration varies (``H_e = H - H_s``) ``c_expansion = C_ROW * (basis_size(d, L + 1) +
ROW_OFFSET)``.  The constants are fitted to ``benchmarks/bench_nonlocal.py --calibrate``
(one core of a 2-core AMD EPYC, single-threaded BLAS; the target cost includes the velocity
from the sums).  Only ratios matter, and the crossover is not sharp: near it both methods
take about a millisecond.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model import AttentionModel
from .base import DEFAULT_TOL, FieldValues, NonlocalEvaluator, PointGroup
from .direct import DirectEvaluator
from .fast import FastEvaluator, FieldPlan, batch_takes_exact_sums, components_fit
from .harmonics import SUPPORTED_DIMENSIONS, basis_size
from .parallel import allreduce_sum

C_DIRECT = 9e-9
DIRECT_OVERHEAD = 5e-5
#: Fixed cost of a fast evaluation (coefficient algebra, small transforms), by d.
FAST_OVERHEAD = {2: 4e-4, 3: 8e-4}
#: (a, b) in ns per source point: a + b * log10(1 / eps), by d.
SOURCE_NS = {2: (20.0, 0.5), 3: (23.0, 6.6)}
#: (a, b) in ns per target point and spectral head: a + b * log10(1 / eps), by d.
TARGET_NS = {2: (78.0, 2.0), 3: (137.0, 6.8)}
#: ns per point of a group that is not fixed (NUFFT plan), by d.
PLAN_NS = {2: 35.0, 3: 85.0}
#: Per-target expansion: seconds per target, head and basis row, and the rows' offset.
C_ROW = 6e-9
ROW_OFFSET = 60


def estimated_costs(
    fast: FastEvaluator | FieldPlan, n_targets: int, n_sources: int, fixed_targets: bool = True,
    fixed_sources: bool = True
) -> dict[str, float]:
    """Modelled seconds of one evaluation by each method (totals over all ranks), from a fast
    evaluator or its :class:`~.fast.FieldPlan`."""
    d, H = fast.model.d, len(fast.model.heads)
    spectral = len(fast.spectral_heads)
    lg = np.log10(1.0 / fast.epsilon)
    source = SOURCE_NS[d][0] + SOURCE_NS[d][1] * lg + (0.0 if fixed_sources else PLAN_NS[d])
    target = (TARGET_NS[d][0] + TARGET_NS[d][1] * lg) * spectral + (
        0.0 if fixed_targets or not spectral else PLAN_NS[d]
    )
    expansion = sum(
        C_ROW * (basis_size(d, fast.degrees[h] + 1) + ROW_OFFSET)
        for h in range(H) if h not in fast.spectral_heads
    )
    return {
        "direct": DIRECT_OVERHEAD + C_DIRECT * H * n_targets * n_sources,
        "fast": FAST_OVERHEAD[d] + 1e-9 * (n_sources * source + n_targets * target) + n_targets * expansion,
    }


#: Seconds per target, source, column and head of the direct field's batched matrix product.
C_BATCH_PRODUCT = 4.5e-11
#: A batched evaluation of k measures on the same fixed points (a causal run's slices): ns per
#: point and basis value of the exact sums' matrix (read at every call), per point, function and
#: basis value of their product, per point and function of a NUFFT, and per target and measure for
#: forming the velocities (one core; :data:`.fast.BATCH_DIRECT_BYTES`).
BATCH_READ_NS = 1.3
BATCH_PRODUCT_NS = 0.05
BATCH_NUFFT_NS = 45.0
BATCH_FORM_NS = 10.0


def estimated_batch_costs(fast: FastEvaluator | FieldPlan, n_targets: int, n_sources: int, measures: int,
                          ranks: int = 1, components: int = 0) -> dict[str, float]:
    """Modelled seconds of one batched evaluation of ``measures`` measures on the same fixed
    points (:meth:`~.base.NonlocalEvaluator.velocities`: a causal run's slices, one a stage) by
    each method, totals over ``ranks`` ranks: the direct field's kernel once and one matrix
    product with the ``(d + 1) k`` columns; the fast field's adjoint of the k measures and, per
    head, the synthesis of ``(d + 1) k`` functions, by the exact sums where their matrices fit
    :data:`.fast.BATCH_DIRECT_BYTES` a rank (:func:`.fast.batch_takes_exact_sums`, else NUFFTs),
    and the velocities formed, or with ``components`` (a scheme that takes that many components
    of the velocity at each target, :meth:`~meanfield.discretisation.base.SpatialScheme.velocity_components`)
    by the exact sums ``1 + components`` matrix products a measure and head (F up to degree L,
    ``N . P_x n`` from the coefficients up to L + 1) while their matrices fit
    (:func:`.fast.components_fit`); a model with a head that is not spectral,
    one evaluation per measure.  The sources' transform is of degree ``L + 1`` by the exact sums
    (the coefficients G needs), ``L + 2`` by a NUFFT (the evaluator's plan, shared with the
    estimate's first neglected degree), the targets' of degree ``L``.  Calibrated with
    ``benchmarks/bench_causal.py``, which prints the model beside the measured field (within
    1.5x either way on S^1 and S^2, FV and DG1, fast and direct)."""
    d, H, k = fast.model.d, len(fast.model.heads), measures
    single = estimated_costs(fast, n_targets, n_sources)
    direct = single["direct"] + C_BATCH_PRODUCT * H * n_targets * n_sources * (d + 1) * k
    if len(fast.spectral_heads) < H:
        return {"direct": direct, "fast": k * single["fast"]}

    def product_ns(points: int, rows: int, functions: int) -> float:  # the exact sums' matrix product
        return points * rows * (BATCH_READ_NS + BATCH_PRODUCT_NS * functions)

    def transform_ns(points: int, degree: int, functions: int, needed: int | None = None) -> float:
        if batch_takes_exact_sums(d, points, degree, functions, ranks):  # the evaluator's own rule
            return product_ns(points, basis_size(d, degree if needed is None else needed), functions)
        return BATCH_NUFFT_NS * points * functions

    L = max(fast.degrees)
    if components and batch_takes_exact_sums(d, n_targets, L, (d + 1) * k, ranks) \
            and components_fit(d, n_targets, L, components, H, ranks):
        per_head = product_ns(n_targets, basis_size(d, L) + components * basis_size(d, L + 1), k) \
            + BATCH_FORM_NS / 4 * n_targets * components * k
    else:
        per_head = transform_ns(n_targets, L, (d + 1) * k) + BATCH_FORM_NS * n_targets * k
    return {"direct": direct,
            "fast": FAST_OVERHEAD[d] + 1e-9 * (transform_ns(n_sources, L + 2, k, L + 1) + H * per_head)}


class AutoEvaluator(NonlocalEvaluator):
    """Decides at the first evaluation between direct and fast, then keeps the choice.

    The decision uses the global numbers of targets and sources (one small ``Allreduce``),
    so every rank makes the same one, and the fast field's :class:`~.fast.FieldPlan` (its
    degrees and heads, from the model alone): only the evaluator chosen is built (a fast one
    sets up caches and splits the communicator by node).  Models with ``d`` other than 2 or 3,
    or with a kernel other than ``exp`` (:attr:`~meanfield.attention.Attention.exponential`),
    always use direct.
    """

    name = "auto"

    def __init__(self, model: AttentionModel, comm=None, tol: float = DEFAULT_TOL, direct_sums: bool = False) -> None:
        super().__init__(model, comm)
        self.tol, self.direct_sums = float(tol), direct_sums
        self.chosen: NonlocalEvaluator | None = None
        self._costs: dict[str, float] | None = None

    def _choose(self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]) -> NonlocalEvaluator:
        if self.model.d not in SUPPORTED_DIMENSIONS or not self.model.kind.exponential:
            return DirectEvaluator(self.model, self.comm)
        local = [sum(g.points.shape[0] for g in targets), sum(g.points.shape[0] for g in sources)]
        counts = allreduce_sum(self.comm, np.array(local, dtype=float))
        self._costs = estimated_costs(
            FieldPlan.of(self.model, self.tol), int(counts[0]), int(counts[1]),
            all(g.fixed for g in targets), all(g.fixed for g in sources),
        )
        if self._costs["fast"] < self._costs["direct"]:  # only the method chosen is built
            return FastEvaluator(self.model, self.comm, self.tol, direct_sums=self.direct_sums)
        return DirectEvaluator(self.model, self.comm)

    def evaluate_groups(
        self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]
    ) -> list[FieldValues]:
        """See :meth:`NonlocalEvaluator.evaluate_groups`; the first call fixes the method."""
        if self.chosen is None:
            self.chosen = self._choose(targets, sources)
        return self.chosen.evaluate_groups(targets, sources)

    def partition_sums(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        columns: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> np.ndarray:
        """The chosen evaluator's :meth:`~.base.NonlocalEvaluator.partition_sums` (the first call
        fixes the method, as for one measure)."""
        chosen = self._chosen_for(targets, sources, fixed_targets, fixed_sources)
        return chosen.partition_sums(targets, sources, columns, fixed_sources=fixed_sources,
                                     fixed_targets=fixed_targets)

    def velocities(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        columns: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
        directions: np.ndarray | None = None,
        mixing: np.ndarray | None = None,
    ) -> np.ndarray:
        """The chosen evaluator's :meth:`~.base.NonlocalEvaluator.velocities` (the first call
        fixes the method, as for one measure)."""
        chosen = self._chosen_for(targets, sources, fixed_targets, fixed_sources)
        return chosen.velocities(targets, sources, columns, fixed_sources=fixed_sources,
                                 fixed_targets=fixed_targets, directions=directions, mixing=mixing)

    def linear_sums(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        vectors: np.ndarray,
        scalars: np.ndarray | None,
        matrix: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> np.ndarray:
        """The chosen evaluator's :meth:`~.base.NonlocalEvaluator.linear_sums` (the first call
        fixes the method, as for one measure)."""
        chosen = self._chosen_for(targets, sources, fixed_targets, fixed_sources)
        return chosen.linear_sums(targets, sources, vectors, scalars, matrix, fixed_sources=fixed_sources,
                                  fixed_targets=fixed_targets)

    def _chosen_for(self, targets: np.ndarray, sources: np.ndarray, fixed_targets: bool,
                    fixed_sources: bool) -> NonlocalEvaluator:
        """The chosen evaluator; the method is fixed at the first call of :meth:`partition_sums`,
        :meth:`velocities` or :meth:`linear_sums` when no evaluation fixed it before."""
        if self.chosen is None:
            self.chosen = self._choose([PointGroup(np.asarray(targets, dtype=float), None, fixed_targets)],
                                       [PointGroup(np.asarray(sources, dtype=float), None, fixed_sources)])
        return self.chosen

    def energy(self, sources: Sequence[PointGroup]) -> float:
        """The chosen evaluator's energy (before any evaluation: the choice for the sources
        evaluated at themselves)."""
        if self.chosen is None:
            self.chosen = self._choose([PointGroup(g.points, None, g.fixed) for g in sources], sources)
        return self.chosen.energy(sources)

    def diagnostics(self) -> dict:
        """The chosen evaluator's diagnostics, plus the modelled costs behind the choice."""
        if self.chosen is None:
            return {"method": self.name, "selected": None}
        out = dict(self.chosen.diagnostics())
        out.update(selected_by=self.name, modelled_costs_s=self._costs)
        return out

"""Fast evaluation of the attention sums on S^1 and S^2: harmonic transforms, truncated by tolerance.

Kernel expansion
----------------
With ``A = Q^T K``, ``beta <Q x, K y> = beta <x, A y>``.  For the heads this module calls
*spectral* -- ``A = c R`` with ``R`` orthogonal and ``c >= 0`` (the default Q = K = I, scaled
or rotated heads) -- the kernel concentration ``kappa = beta c`` is the same at every target
and, by Funk-Hecke,

    sum_j w_j exp(kappa <x, R y_j>) [y_j, 1] = sum_{l <= L} mult_l(kappa) sum_m C_lm Y_lm(x),

``C`` the coefficients (:mod:`.spectral`) of the measures ``w_j [y_j, 1] delta_{R y_j}``.  One
evaluation is then

1. one adjoint transform of the weights at this rank's sources (``ducc0`` NUFFT,
   :mod:`.transforms`) and one ``Allreduce`` of the coefficients (a few kB);
2. on the coefficients only: the moments of ``w_j y_j`` by the coordinate recurrences,
   the rotation by ``R`` and the kernel factors ``mult_l`` (computed once per head and degree,
   :class:`HeadTerms`);
3. one synthesis of ``d + 1`` real functions per head at this rank's targets.

The cost per point grows only with the logarithm of the NUFFT accuracy, not with the degree
(the degree enters through small ``O(L^3)`` coefficient operations), and memory is linear in
the number of points (a NUFFT plan per point set, kept while the points are fixed).  The
returned sums are scaled by ``exp(-kappa)`` (``log_scale = kappa``).

Other heads (``kappa`` varies with the target) use the per-target expansion of
:mod:`.expansion` with moments taken from the same coefficients; every head does when the
tolerance is below :data:`TRANSFORM_TOL_FLOOR` (the NUFFT's accuracy limit), with exact
moments.

Point groups (atoms)
--------------------
:meth:`FastEvaluator.evaluate_groups` takes several source and target groups.  Coefficients
are additive, so every source group adds its adjoint transform to one coefficient array (one
``Allreduce`` whatever the number of groups), and every target group gets its own synthesis.
Plans are kept per fixed group, keyed by the group's array, so a small group that moves every
stage (atoms, point masses that are both sources and targets) costs a fresh plan for its few
points and leaves the fixed mesh groups' plans in place.

Truncation rule and accuracy
----------------------------
Head h uses the degree ``L_h = truncation_degree(d, kmax_h, tol)``, ``kmax_h = beta ||A_h||_2``:
the smallest L with ``sum_{l > L} omega_l(kmax_h) <= tol * omega_0(kmax_h)``, ``omega_l``
bounding the degree-l part of the kernel (:mod:`.harmonics`).  This bounds the truncation
error of Z and of each component of ``sum_j w_j exp(...) y_j`` by ``tol`` times what a
uniform measure of the same mass gives for Z.  The NUFFTs run at accuracy
``EPSILON_FACTOR[d] * tol``.

Error measure: ``max_i |X_fast(x_i) - X_direct(x_i)| / max_i |X_direct(x_i)|`` (pointwise
relative error is not attainable where X vanishes).  For softmax attention the error of X is
about that of N and Z divided by Z: below ``tol`` for measures spread like a density, larger
at targets where Z is exponentially small (a measure collapsed into clusters far from the
target at large ``kappa``).  :meth:`FastEvaluator.diagnostics` reports an a-posteriori
estimate of the last evaluation, computed when it is asked for from what the evaluation kept
at the sampled targets (:class:`EstimateInput`; evaluations do not synthesise the neglected
degree): for spectral heads a bound of the first neglected degree (from its coefficients:
Cauchy-Schwarz and the addition theorem) plus the NUFFT's accuracy, propagated to X at every
sampled target; for the other heads the first neglected degree's actual effect on X.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..model import AttentionModel
from .base import DEFAULT_TOL, FieldValues, NonlocalEvaluator, PointGroup, array_key, components
from .expansion import BasisCache, default_cache_bytes, exact_moments, target_sums
from .harmonics import basis_size, tail_ratios, truncation_degree
from .parallel import allreduce_sum
from .spectral import SphereSpectrum, kernel_multipliers, spectrum_for
from .transforms import EPSILON_FLOOR, DirectTransform, Transform, point_transform

#: Below this tolerance the NUFFT cannot deliver: every head uses the exact expansion.
TRANSFORM_TOL_FLOOR = 1e-12
#: NUFFT accuracy relative to the tolerance, by d.  The NUFFTs' error of F and G (adjoint and
#: synthesis together) was measured at most 0.8 epsilon of their largest value on S^1 and 0.2
#: epsilon on S^2; it enters X about doubled (through N and Z), so these factors keep it to a
#: few per cent of tol next to the truncation error, which the rule lets approach tol.
EPSILON_FACTOR = {2: 1e-2, 3: 1e-1}
#: Tolerance of :meth:`FastEvaluator.energy` (observables want more digits than the field).
ENERGY_TOL = 1e-13
#: Targets per group and rank at which the estimate evaluates the spectral heads' first
#: neglected degree (one small extra transform).
ESTIMATE_SAMPLES = 2048
#: Bytes per rank (on average over the ranks) up to which the batched calls (several measures or
#: functions at once: a causal run's slices, the adjoint's columns) transform a fixed point set
#: by the direct sums, one matrix product: about 0.04 ns per point, function and basis value
#: against 45 ns per point and function for a NUFFT (S^2, tol 1e-6; one core, measured).  128 MiB
#: take a DG1 causal run on S^2 level 5 on one rank (81920 velocity points at L = 13: 123 MiB):
#: its step cost 44-46 non-causal steps at M = 64 by NUFFTs (64 MiB), 15.5-17 by the exact sums.
BATCH_DIRECT_BYTES = 128 * 2**20
#: Functions per basis value from which a batched call takes the direct sums at all: they read
#: their whole matrix at every call (memory-bound, about 1 ns per point and basis value here),
#: which a NUFFT's 45 ns per point and function repays only for a few dozen functions at once
#: (measured, S^2, 8000 points: at L = 20, 4 functions 9.3 ms direct against 1.9 ms by NUFFT, 64
#: functions 19 ms against 24 ms; a DG1 adjoint's 4 columns took twice as long by the direct sums).
BATCH_DIRECT_FUNCTIONS_PER_BASIS = 1 / 16
#: About how many values (targets times directions times measures) :meth:`FastEvaluator._components`
#: forms at a time (a block in a core's cache: product, factor and transpose).
COMPONENTS_BLOCK = 1 << 17
#: Bytes a rank (on average over the ranks) that the components' matrices of all heads may take
#: (:func:`components_fit`; per head F's and the directions', (1 + 1.15 j) times the exact sums'
#: own matrix on S^2: 404 MiB for DG1 on S^2 level 5 on one rank); beyond, a batch synthesises
#: ``[G, F]`` and projects the velocities.
COMPONENT_BYTES = 512 * 2**20
#: Relative spread of the singular values of ``Q^T K`` up to which a head counts as spectral.
SPECTRAL_RTOL = 1e-12


def batch_takes_exact_sums(d: int, points: float, degree: int, functions: int, ranks: int = 1) -> bool:
    """Whether a batched call of ``functions`` measures or functions at once transforms a fixed
    set of ``points`` (all ranks') at ``degree`` by the exact sums: at least
    :data:`BATCH_DIRECT_FUNCTIONS_PER_BASIS` functions per basis value, and their matrix within
    :data:`BATCH_DIRECT_BYTES` a rank on average."""
    basis = basis_size(d, degree)
    return functions >= basis * BATCH_DIRECT_FUNCTIONS_PER_BASIS and 8.0 * points * basis <= BATCH_DIRECT_BYTES * ranks


def components_fit(d: int, points: float, degree: int, directions: int, heads: int, ranks: int = 1) -> bool:
    """Whether the matrices that give ``directions`` components of the velocity at each of a
    fixed set of ``points`` (all ranks') by the exact sums (:meth:`FastEvaluator._component_matrices`:
    per head, F's of the basis at ``degree`` and one of the basis at ``degree + 1`` per direction)
    fit :data:`COMPONENT_BYTES` a rank on average."""
    size = basis_size(d, degree) + directions * basis_size(d, degree + 1)
    return 8.0 * points * size * heads <= COMPONENT_BYTES * ranks


def head_concentrations(model: AttentionModel) -> np.ndarray:
    """``kmax_h = beta ||Q_h^T K_h||_2`` for every head: the largest kernel concentration."""
    return np.array([model.beta * np.linalg.norm(h.interaction, 2) for h in model.heads])


def orthogonal_factor(A: np.ndarray) -> tuple[float, np.ndarray] | None:
    """``(c, R)`` with ``A = c R``, ``R`` orthogonal, when ``A`` is such a multiple (to
    :data:`SPECTRAL_RTOL` in its singular values), else None.  ``R`` is the orthogonal polar
    factor (exactly orthogonal); ``A = 0`` gives ``(0, I)``."""
    U, s, Wt = np.linalg.svd(A)
    if s[0] == 0.0:
        return 0.0, np.eye(A.shape[0])
    if s[0] - s[-1] > SPECTRAL_RTOL * s[0]:
        return None
    return float(s.mean()), U @ Wt


def resize(c: np.ndarray, d: int, L: int) -> np.ndarray:
    """Coefficients truncated or zero-padded to degree L (leading axes kept)."""
    axes = d - 1
    lead = c.shape[: c.ndim - axes]
    out = np.zeros(lead + (L + 1,) * axes, dtype=complex)
    k = min(L, c.shape[-1] - 1)
    out[(...,) + (slice(0, k + 1),) * axes] = c[(...,) + (slice(0, k + 1),) * axes]
    return out


@dataclass(frozen=True)
class FieldPlan:
    """What a fast evaluation of a model at a tolerance is made of, from the model alone (no
    points, no memory, no communication): the degree of each head, the orthogonal factor of the
    heads evaluated by transforms (``None`` for the others), the NUFFT accuracy.  The cost
    model of the ``auto`` method reads it without building an evaluator."""

    model: AttentionModel
    degrees: tuple[int, ...]
    factors: tuple[tuple[float, np.ndarray] | None, ...]
    epsilon: float

    @classmethod
    def of(cls, model: AttentionModel, tol: float) -> FieldPlan:
        """The plan of ``model`` (d = 2 or 3) at tolerance ``tol`` (the module docstring's rule)."""
        transforms = tol >= TRANSFORM_TOL_FLOOR
        return cls(model, tuple(truncation_degree(model.d, k, tol) for k in head_concentrations(model)),
                   tuple(orthogonal_factor(h.interaction) if transforms else None for h in model.heads),
                   EPSILON_FACTOR[model.d] * tol)

    @property
    def spectral_heads(self) -> list[int]:
        """Indices of the heads evaluated by transforms."""
        return [h for h, f in enumerate(self.factors) if f is not None]


@dataclass
class Measure:
    """The global source measure as one evaluation needs it: coefficients (degree L), the
    exact sums ``[sum_j w_j y_j, sum_j w_j]`` and the coefficients' accuracy relative to
    ``sum_j |w_j|`` (the transforms' ``epsilon`` weighted by the ``|w|`` each was given, over
    all ranks: 0 where every rank summed directly)."""

    coefficients: np.ndarray
    sums: np.ndarray
    epsilon: float


@dataclass(frozen=True)
class HeadTerms:
    """What a spectral head's evaluations share, fixed by the model and the degree alone
    (computed once, at construction): the kernel concentration ``kappa``, the kernel factors
    ``mult_l`` of degrees 0..L + 1 shaped to multiply a coefficient array, and the rotation
    ``R`` (None for the identity)."""

    kappa: float
    multipliers: np.ndarray
    rotation: np.ndarray | None


def head_terms(d: int, L: int, beta: float, factor: tuple[float, np.ndarray]) -> HeadTerms:
    """:class:`HeadTerms` of a head of degree L with ``Q^T K = c R`` (``factor = (c, R)``)."""
    c, R = factor
    kappa = beta * c
    mult = kernel_multipliers(d, L + 1, kappa)
    return HeadTerms(kappa, mult[:, None] if d == 3 else mult, None if np.array_equal(R, np.eye(d)) else R)


@dataclass
class SpectralHead:
    """What one evaluation prepares for a spectral head of degree L: the coefficient sets of its
    ``d + 1`` functions ``[G, F]`` (kernel factors applied) up to degree L + 1, whose degrees
    up to L are the field and whose degree L + 1 is the first neglected one; or, when
    ``kappa = 0`` (constant kernel), the exact constant values ``[sum w y, sum w]``."""

    index: int
    kappa: float
    degree: int
    coefficients: np.ndarray | None
    constant: np.ndarray | None = None


def place(out: np.ndarray, c: np.ndarray, degrees: slice) -> None:
    """Write the degrees ``degrees`` of the coefficient sets ``c`` (shape (k,) + spectrum
    shape) into ``out`` (k sets of a degree at least the largest of ``degrees``, zero
    elsewhere); on S^2 the orders beyond ``out``'s, zero at those degrees, are left out."""
    orders = (slice(0, min(c.shape[-1], out.shape[-1])),) * (c.ndim - 2)
    out[(slice(None), degrees) + orders] = c[(slice(None), degrees) + orders]


@dataclass
class EstimateInput:
    """What the a-posteriori estimate needs of one target group of an evaluation, at its
    sampled targets (:func:`estimate_samples`): their points, the field there, the spectral
    heads' preparations with their scaled sums ``[G, F]`` at the samples, the transform that
    synthesises the neglected degree at the samples (the targets' own when every target is
    sampled and it reaches that degree, as a shared source plan does; else None: one is
    planned when the estimate is asked for) and that degree, the
    accuracy of the transforms behind the values (the larger of the measure's and the
    targets' transform's ``epsilon``; 0 for exact sums), and for the other heads
    ``(h, sums, neglected part, kappa)`` at the samples."""

    points: np.ndarray
    heads: list[SpectralHead]
    fields: list[np.ndarray] = field(default_factory=list)
    probe: Transform | None = None
    degree: int = 0
    epsilon: float = 0.0
    expanded: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    values: FieldValues | None = None


def estimate_samples(m: int) -> slice | np.ndarray:
    """The targets (of m) at which the estimate looks at spectral heads: all of them up to
    :data:`ESTIMATE_SAMPLES` (a slice: views, not copies), else the indices of that many evenly
    spaced ones."""
    if m <= ESTIMATE_SAMPLES:
        return slice(None)
    return np.linspace(0, m - 1, ESTIMATE_SAMPLES).astype(int)


def plan_of(plans: Sequence[tuple[np.ndarray, Transform]], points: np.ndarray) -> Transform | None:
    """The transform of a source group whose points equal ``points`` (targets that are also
    sources share its plan), else None.

    Compared by value, not by object: the synthesis at a source plan (degree L + 2) and at a
    targets plan (degree L + 1) differ by the NUFFT's error, so the result must not depend on
    whether the caller passed the same array object twice or two equal ones (tokens restored
    from a checkpoint arrive as arrays that ``np.asarray`` wraps in new views).
    """
    for source, plan in plans:
        if source is points or (source.shape == points.shape and np.array_equal(source, points)):
            return plan
    return None


class ComponentMatrices(NamedTuple):
    """A head's sums at fixed targets as matrices on the coefficients seen as reals
    (:meth:`FastEvaluator._component_matrices`): with ``R = reals[:, rows]``, the scaled F is
    ``R[:, :len(partition)] @ partition`` (those rows: the coefficients up to degree L) and the
    scaled ``N . P_x n`` along the i-th of the j directions at each target is ``R @ along[i]``
    (``along`` of shape (j, rows, targets))."""

    rows: np.ndarray
    partition: np.ndarray
    along: np.ndarray


class FastEvaluator(NonlocalEvaluator):
    """Transform-based (and per-target expansion) evaluation; see the module docstring.

    Parameters
    ----------
    model
        Attention model with ``d`` = 2 (S^1) or 3 (S^2).
    comm
        MPI communicator; each rank transforms its own sources (one ``Allreduce`` of the
        coefficients per evaluation) and evaluates only its own targets.
    tol
        Target accuracy of the velocity, in the measure of the module docstring.
    cache_bytes
        Byte budget of the per-target expansion's basis cache (heads with varying
        ``kappa``); default :func:`.expansion.default_cache_bytes`.  Transform plans are
        always kept for fixed point groups (their memory is linear in the points).
    direct_sums
        Transform a fixed point group by exact sums where that is cheaper than a NUFFT (a
        rank's few points: :func:`.transforms.point_transform`).  Off by default: a NUFFT's
        result differs from the exact sums by its accuracy (below ``tol / 10``), so with direct
        sums a run on many ranks (few points each) and one on one rank agree to that accuracy,
        not to round-off.
    """

    name = "fast"

    def __init__(
        self,
        model: AttentionModel,
        comm=None,
        tol: float = DEFAULT_TOL,
        cache_bytes: int | None = None,
        direct_sums: bool = False,
    ) -> None:
        if model.d not in (2, 3):
            raise ValueError(f"nonlocal.method 'fast': needs d = 2 or 3, got d = {model.d}")
        super().__init__(model, comm)
        self.tol, self.direct_sums = float(tol), direct_sums
        self.kmax = head_concentrations(model)
        plan = FieldPlan.of(model, self.tol)
        self.degrees, self.factors, self.epsilon = plan.degrees, plan.factors, plan.epsilon
        self.transforms = self.tol >= TRANSFORM_TOL_FLOOR
        self._terms: dict[tuple[int, int], HeadTerms] = {}  # by (head, degree): see _head_terms
        self._plain_V = [np.array_equal(h.V, np.eye(model.d)) for h in model.heads]
        # coefficients up to two degrees beyond the heads': one for the first neglected degree
        # (the estimate), one consumed by the coordinate recurrences
        self.coefficient_degree = max(self.degrees) + 2
        self._norms_V = [float(np.linalg.norm(h.V, 2)) for h in model.heads]
        self.cache = BasisCache(default_cache_bytes(comm) if cache_bytes is None else cache_bytes)
        # NUFFT plans of fixed point groups, by (role, array key); replaced by those used in
        # each call, so plans of arrays no longer passed are dropped
        self._plans: dict[tuple, Transform] = {}
        self._energy_plans: dict[tuple, Transform] = {}
        self._batch_plans: dict[tuple, Transform] = {}  # of the batched calls (velocities, partition_sums, ...)
        self._component_sums: dict[tuple, ComponentMatrices] = {}  # of the batched components, kept per targets
        self._components_fit: dict[tuple, bool] = {}  # components_fit of the last fixed targets and directions
        self._exact: FastEvaluator | None = None  # the energy of models with general heads
        self._estimate_inputs: list[EstimateInput] = []

    @property
    def spectral_heads(self) -> list[int]:
        """Indices of the heads evaluated by transforms."""
        return [h for h, f in enumerate(self.factors) if f is not None]

    def _factor(self, h: int) -> tuple[float, np.ndarray]:
        """``(c, R)`` of spectral head ``h`` (one of :attr:`spectral_heads`)."""
        factor = self.factors[h]
        assert factor is not None, f"head {h} is not evaluated by transforms"
        return factor

    def _head_terms(self, h: int) -> HeadTerms:
        """:class:`HeadTerms` of spectral head ``h`` at its degree, computed on first use."""
        key = (h, self.degrees[h])
        if key not in self._terms:
            self._terms[key] = head_terms(self.model.d, self.degrees[h], self.model.beta, self._factor(h))
        return self._terms[key]

    # -- transforms of point groups ---------------------------------------------------------
    def _transform(self, kept: dict, used: dict, role: str, points: np.ndarray, key: tuple | None, L: int,
                   epsilon: float, adjoint: bool) -> Transform:
        """The transform of ``points`` for ``role``; ``key`` (the array key of a fixed group, or
        None) finds it among the plans ``kept`` from the previous call, and keeps it in ``used``."""
        full = (role, key)
        plan = kept.get(full) if key is not None else None
        if plan is None:
            plan = point_transform(np.ascontiguousarray(points, dtype=float), L, epsilon, adjoint,
                                   self.direct_sums and key is not None)
        if key is not None:
            used[full] = plan
        return plan

    def _measure(
        self, kept: dict, used: dict, sources: Sequence[PointGroup], L: int, epsilon: float
    ) -> tuple[Measure, list[tuple[np.ndarray, Transform]]]:
        """The global measure (:class:`Measure`, coefficients of degree L) and the transforms
        used with their points (for targets that are also sources, :func:`plan_of`).
        Collective: one ``Allreduce``."""
        d = self.model.d
        spectrum = spectrum_for(d, L)
        local = np.zeros(spectrum.shape, dtype=complex)
        extra = np.zeros(d + 3)  # sum w y, sum w; sum epsilon |w|, sum |w| (the accuracy)
        plans: list[tuple[np.ndarray, Transform]] = []
        for g in sources:
            key = array_key(g.points) if g.fixed else None
            plan = self._transform(kept, used, "sources", g.points, key, L, epsilon, True)
            w = np.asarray(g.weights, dtype=float)
            local += plan.adjoint(w)
            mass = float(np.abs(w).sum())
            extra[:d] += w @ g.points
            extra[d:] += (w.sum(), plan.epsilon * mass, mass)
            plans.append((g.points, plan))
        flat = allreduce_sum(self.comm, np.concatenate([local.ravel().view(float), extra]))
        coeffs = flat[: -(d + 3)].view(complex).reshape(spectrum.shape)
        weighted, mass = flat[-2:]
        return Measure(coeffs, flat[-(d + 3) : -2], weighted / mass if mass > 0 else 0.0), plans

    # -- per-head preparation ----------------------------------------------------------------
    def _spectral_head(self, h: int, measure: Measure, vector: np.ndarray) -> SpectralHead:
        d, L, terms = self.model.d, self.degrees[h], self._head_terms(h)
        if terms.kappa == 0.0:
            return SpectralHead(h, 0.0, L, None, measure.sums)
        block = (slice(0, L + 2),) * (d - 1)
        stack = np.empty((d + 1,) + (L + 2,) * (d - 1), dtype=complex)
        stack[:d] = vector[(slice(None),) + block]
        stack[d] = measure.coefficients[block]
        if terms.rotation is not None:
            stack = spectrum_for(d, L + 1).rotate(stack, terms.rotation)
        stack *= terms.multipliers
        return SpectralHead(h, terms.kappa, L, stack)

    def _synthesise(
        self, plan: Transform, heads: list[SpectralHead], which: Sequence[str]
    ) -> list[list[np.ndarray]]:
        """For each name in ``which`` (``"fields"``: degrees up to L, ``"neglected"``: degree
        L + 1), per head, ``[G, F]`` (shape (d + 1, m)) at the plan's points, in one synthesis
        call; constant kernels give their constants (and no neglected part)."""
        d, m = self.model.d, plan.size
        active = [s for s in heads if s.constant is None]
        count = len(which) * len(active)
        sets = np.zeros((count, d + 1) + plan.spectrum.shape, dtype=complex)
        for i, (name, s) in enumerate((name, s) for name in which for s in active):
            assert s.coefficients is not None  # every active head has them
            L = s.degree
            place(sets[i], s.coefficients, slice(0, L + 1) if name == "fields" else slice(L + 1, L + 2))
        sets = sets.reshape((-1,) + plan.spectrum.shape)
        # count, not -1: with no points (m = 0: the atoms on ranks other than 0) numpy cannot
        # infer it, and a rank-local error there leaves the other ranks in a collective
        values = iter(plan.synthesis(sets).reshape(count, d + 1, m) if active else ())
        out = []
        for name in which:
            per_head = []
            for s in heads:
                if s.constant is None:
                    per_head.append(next(values))
                else:
                    value = s.constant if name == "fields" else np.zeros(d + 1)
                    per_head.append(np.broadcast_to(value[:, None], (d + 1, m)))
            out.append(per_head)
        return out

    # -- evaluation ------------------------------------------------------------------------
    def evaluate_groups(
        self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]
    ) -> list[FieldValues]:
        """See :meth:`NonlocalEvaluator.evaluate_groups`; ``log_scale`` is ``kappa_h(x)``.

        Keeps what the a-posteriori estimate needs at the sampled targets
        (:class:`EstimateInput`); :meth:`diagnostics` computes the estimate from it.
        """
        model, d = self.model, self.model.d
        spectral = self.spectral_heads
        used: dict = {}
        if self.transforms:
            measure, source_plans = self._measure(self._plans, used, sources, self.coefficient_degree, self.epsilon)
            coeffs = measure.coefficients
            vector = spectrum_for(d, self.coefficient_degree).vector_moments(coeffs)
            prepared = [self._spectral_head(h, measure, vector) for h in spectral]
            if len(spectral) < len(model.heads):
                lead = spectrum_for(d, self.coefficient_degree - 1)
                moments = np.column_stack(
                    [lead.real_moments(v) for v in vector]
                    + [lead.real_moments(resize(coeffs, d, self.coefficient_degree - 1))]
                )
        else:
            prepared, source_plans = [], []
            L = max(self.degrees) + 1
            local = np.zeros((basis_size(d, L), d + 1))
            for i, g in enumerate(sources):
                points = np.ascontiguousarray(g.points, dtype=float)
                weights = np.asarray(g.weights, dtype=float)
                local += exact_moments(points, weights, L, self.cache, ("sources", i), g.fixed)
            moments = allreduce_sum(self.comm, local)
        results, inputs = [], []
        for t_index, group in enumerate(targets):
            points = np.ascontiguousarray(group.points, dtype=float)
            m, H = points.shape[0], len(model.heads)
            values = FieldValues.empty(H, m, d)
            sample = estimate_samples(m)
            every = isinstance(sample, slice)
            record = EstimateInput(points[sample].copy(), prepared)  # a copy: the caller's points may change
            if prepared:
                key = array_key(group.points) if group.fixed else None
                L = max(self.degrees[h] for h in spectral)
                plan = plan_of(source_plans, points) or self._transform(
                    self._plans, used, "targets", points, key, L, self.epsilon, False
                )
                fields = self._synthesise(plan, prepared, ("fields",))[0]
                record.degree, record.probe = L + 1, plan if every and plan.L > L else None
                record.epsilon = max(measure.epsilon, plan.epsilon)
                for s, GF in zip(prepared, fields):
                    self._store(values, s.index, GF, s.kappa)
                    record.fields.append(GF[:, sample])  # the evaluation's own arrays: views kept
            for h, head in enumerate(model.heads):
                if h in spectral:
                    continue
                sums, extra, kappa = target_sums(
                    points, head.interaction, model.beta, self.degrees[h], moments, self.cache,
                    (t_index, h), group.fixed,
                )
                self._store(values, h, sums, kappa)
                record.expanded.append((h, sums[:, sample], extra[:, sample], kappa[sample]))
            record.values = FieldValues(values.N[:, sample].copy(), values.Z[:, sample].copy(),
                                        values.log_scale[:, sample].copy())  # the caller's
            results.append(values)
            inputs.append(record)
        self._plans = used
        self._estimate_inputs = inputs
        return results

    def partition_sums(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        columns: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> np.ndarray:
        """See :meth:`NonlocalEvaluator.partition_sums`.  With every head spectral, one adjoint
        transform of all k columns (two to a complex NUFFT) and one ``Allreduce`` give their
        coefficients, and one synthesis per head of the k kernel-weighted coefficient sets
        gives the sums: about the cost of ``k / 2`` evaluations' transforms, where one
        evaluation per column would synthesise ``d + 1`` functions each.  Heads whose
        concentration varies take the per-target expansion of all k columns at once, with
        moments from the same coefficients (one matrix product with the targets' basis).  The
        degrees and accuracy are those of :meth:`evaluate_groups` (with its transforms, the same
        sums to round-off).  Below the transforms' tolerance, one column after the other."""
        model, d = self.model, self.model.d
        if not self.transforms:
            return super().partition_sums(targets, sources, columns, fixed_sources=fixed_sources,
                                          fixed_targets=fixed_targets)
        used: dict = {}
        coeffs, sums, source_plan = self._column_coefficients(used, sources, columns, fixed_sources)
        totals = sums[:, -1]
        targets = np.ascontiguousarray(targets, dtype=float)
        spectral = self.spectral_heads
        synthesis = self._targets_plan(used, source_plan, targets, fixed_targets,
                                       max(self.degrees[h] for h in spectral), totals.size) if spectral else None
        out = np.empty((len(model.heads), targets.shape[0], totals.size))
        for h, head in enumerate(model.heads):
            if h not in spectral:  # the per-target expansion, its moments from the coefficients
                lead, degree = spectrum_for(d, self.coefficient_degree - 1), self.coefficient_degree - 1
                moments = np.column_stack([lead.real_moments(c) for c in resize(coeffs, d, degree)])
                scaled, _, kappa = target_sums(targets, head.interaction, model.beta, self.degrees[h], moments,
                                               self.cache, ("columns", h), fixed_targets)
                out[h] = (np.exp(kappa) * scaled).T
                continue
            assert synthesis is not None
            kernel = self._kernel_sets(h, coeffs)
            if kernel is None:
                out[h] = totals
                continue
            sets = np.zeros((totals.size,) + synthesis.spectrum.shape, dtype=complex)
            place(sets, kernel, slice(0, self.degrees[h] + 1))
            out[h] = np.exp(self._head_terms(h).kappa) * synthesis.synthesis(sets).T
        self._batch_plans = used
        return out

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
        """See :meth:`NonlocalEvaluator.velocities`.  With every head spectral: one adjoint
        transform of the k measures (two to a complex NUFFT), their vector moments on the
        coefficients, and per head one synthesis of the ``(d + 1) k`` functions ``[G, F]``, with
        the degrees, plans and accuracy of :meth:`evaluate_groups` (the same velocities to
        round-off).  A ``mixing`` acts on the coefficients.  Otherwise one measure after the
        other.  (The a-posteriori estimate of :meth:`diagnostics` stays that of the last
        :meth:`evaluate_groups`.)"""
        model, d = self.model, self.model.d
        if not self.transforms or len(self.spectral_heads) < len(model.heads):
            return super().velocities(targets, sources, columns, fixed_sources=fixed_sources,
                                      fixed_targets=fixed_targets, directions=directions, mixing=mixing)
        used: dict = {}
        # G up to degree L needs the coefficients up to L + 1 only (not the estimate's L + 2)
        coeffs, totals, source_plan = self._column_coefficients(used, sources, columns, fixed_sources, mixing,
                                                                max(self.degrees) + 1)
        targets = np.ascontiguousarray(targets, dtype=float)
        k, m, H = totals.shape[0], targets.shape[0], len(model.heads)
        synthesis = self._targets_plan(used, source_plan, targets, fixed_targets, max(self.degrees), k * (d + 1))
        if directions is not None and fixed_targets and isinstance(synthesis, DirectTransform) \
                and all(self._head_terms(h).kappa != 0.0 for h in range(H)) and self._fit(targets, directions):
            self._batch_plans = used
            return self._components(coeffs, synthesis, targets, np.asarray(directions, dtype=float))
        vector = spectrum_for(d, self.coefficient_degree).vector_moments(coeffs)  # (d, k) + spectrum, degree L + 1
        degrees = (slice(None), slice(None)) + tuple(slice(0, n) for n in vector.shape[2:])
        functions = np.concatenate([vector, coeffs[None][degrees]]).reshape(((d + 1) * k,) + vector.shape[2:])
        sums = []  # per head [G, F] (d + 1, k m): the k measures' values one after the other, as k m targets
        for h in range(H):
            kappa = self._head_terms(h).kappa
            if kappa == 0.0:  # a constant kernel: the exact sums [sum w y, sum w]
                GF = np.broadcast_to(totals.T[:, :, None], (d + 1, k, m))
            else:
                GF = self._synthesised(h, functions, synthesis)
            sums.append((GF.reshape(d + 1, k * m), kappa))
        self._batch_plans = used
        X = self._values(sums, k * m).velocity(model, targets, directions)
        return X.reshape((k,) + (directions.shape[:-1] if directions is not None else (m, d)))

    def _fit(self, targets: np.ndarray, directions: np.ndarray) -> bool:
        """:func:`components_fit` for these fixed targets and directions (collective, once: every
        rank decides alike on the total number of targets)."""
        key = (array_key(targets), array_key(directions))
        if key not in self._components_fit:
            total = float(allreduce_sum(self.comm, np.array([float(targets.shape[0])]))[0])
            ranks = 1 if self.comm is None else self.comm.size
            fits = components_fit(self.model.d, total, max(self.degrees), int(np.prod(directions.shape[1:-1])),
                                  len(self.model.heads), ranks)
            self._components_fit = {key: fits}
        return self._components_fit[key]

    def _components(self, coeffs: np.ndarray, synthesis: DirectTransform, targets: np.ndarray,
                    directions: np.ndarray) -> np.ndarray:
        """The velocities' components (k, m) along ``directions`` (m, d), or (k, m, j) along
        (m, j, d), at fixed targets, of the k measures with coefficients ``coeffs`` (k,) +
        spectrum, by the exact sums: per head, the product of the coefficients with matrices
        that give F and ``N . P_x n`` (:meth:`_component_matrices`), ``1 + j`` functions a
        measure instead of ``d + 1``.  With ``n`` projected on the tangent plane the projection
        of the velocity drops out: ``P_x(f N) . n = f N . P_x n``.

        Formed a block of targets at a time (about :data:`COMPONENTS_BLOCK` values: the
        products, the attention factor and the transpose stay in a core's cache), and returned
        as a transposed view of values (j, m, k): a scheme's layout, the measures side by side,
        one direction after the other."""
        model, k, m = self.model, coeffs.shape[0], targets.shape[0]
        j = int(np.prod(directions.shape[1:-1]))
        reals = coeffs.reshape(k, -1).view(float)  # (re, im) of each coefficient
        kept, heads = {}, []
        for h in range(len(model.heads)):
            key = (h, synthesis.L, array_key(targets), array_key(directions))
            matrices = self._component_sums.get(key) or self._component_matrices(h, synthesis, targets, directions)
            kept[key] = matrices
            coefficients = np.ascontiguousarray(reals[:, matrices.rows])
            heads.append((model.heads[h].weight, self._head_terms(h).kappa, coefficients, matrices))
        self._component_sums = kept
        out = np.empty((j, m, k))
        count = max(COMPONENTS_BLOCK // max(j * k, 1), 1)
        for start in range(0, m, count):
            block = slice(start, min(start + count, m))
            total = None
            for weight, kappa, coefficients, matrices in heads:
                F = coefficients[:, : matrices.partition.shape[0]] @ matrices.partition[:, block]
                values = np.empty((j, k, F.shape[1]))  # direction by direction: long rows for the factor
                for direction, along in enumerate(matrices.along):
                    np.matmul(coefficients, along[:, block], out=values[direction])
                values *= model.kind.factor(weight, F, np.broadcast_to(kappa, F.shape))
                if total is None:
                    total = values
                else:
                    total += values
            assert total is not None  # a model has a head
            for direction in range(j):
                out[direction, block] = total[direction].T
        return out.transpose(2, 1, 0).reshape((k,) + directions.shape[:-1])

    def _component_matrices(self, h: int, synthesis: DirectTransform, targets: np.ndarray,
                            directions: np.ndarray) -> ComponentMatrices:
        """Head h's scaled F and ``N . P_x n`` at the targets as matrices on the coefficients seen as
        reals (re, im of each; :class:`ComponentMatrices`), for j directions (m, j, d) at each target
        (one for directions (m, d)): the batched path's maps (vector moments, rotation, kernel
        multipliers, synthesis, and V with the targets' ``V^T P_x n``) applied once to each real
        unit coefficient."""
        model, d, L = self.model, self.model.d, self.degrees[h]
        spectrum = spectrum_for(d, self.coefficient_degree)
        valid = spectrum.mask if isinstance(spectrum, SphereSpectrum) else np.ones(spectrum.shape, dtype=bool)
        index = np.indices(spectrum.shape)  # degree first, order last (S^1: the order is the degree)
        slots = np.flatnonzero((valid & (index[0] <= L + 1)).ravel())  # G up to degree L takes those up to L + 1
        imaginary = slots[index[-1].ravel()[slots] > 0]  # of a real measure, order 0's are real
        slots, parts = np.concatenate([slots, imaginary]), np.repeat([0, 1], [len(slots), len(imaginary)])
        first = np.argsort(index[0].ravel()[slots] > L, kind="stable")  # those up to degree L (F's) first
        slots, parts = slots[first], parts[first]
        unit = np.zeros((len(slots), valid.size), dtype=complex)
        unit[np.arange(len(slots)), slots] = np.where(parts == 1, 1j, 1.0)
        unit = unit.reshape((len(slots),) + spectrum.shape)
        vector = spectrum.vector_moments(unit)  # (d, rows) + spectrum
        each = directions.reshape(targets.shape[0], -1, d)  # (m, j, d)
        tangent = each - components(targets, each)[..., None] * targets[:, None]
        weights = tangent if self._plain_V[h] else tangent @ model.heads[h].V  # V^T P_x n, point by point
        along = np.zeros((weights.shape[1], len(slots), weights.shape[0]))  # (j, rows, m)
        for c in range(d):
            along += self._synthesised(h, vector[c], synthesis)[None] * weights[:, :, c].T[:, None, :]
        low = int(np.count_nonzero(index[0].ravel()[slots] <= L))
        return ComponentMatrices(2 * slots + parts, self._synthesised(h, unit[:low], synthesis), along)

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
        """See :meth:`NonlocalEvaluator.linear_sums`.  With every head spectral, the ``(d + 1) k``
        columns' coefficients come from one adjoint transform (as :meth:`partition_sums`), and
        the sum over the components, ``sum_i x_i (A^T S)_i - s`` with ``S`` the vector sums,
        is taken on the coefficients (multiplying a function of degree L by a coordinate gives
        one of degree L + 1, by the recurrences of ``vector_moments``, exactly): one synthesis
        of k functions per head instead of ``(d + 1) k``.  Otherwise as the default."""
        model, d = self.model, self.model.d
        if not self.transforms or len(self.spectral_heads) < len(model.heads):
            return super().linear_sums(targets, sources, vectors, scalars, matrix, fixed_sources=fixed_sources,
                                       fixed_targets=fixed_targets)
        n, _, k = vectors.shape
        columns = np.asarray(vectors, dtype=float).reshape(n, d * k)
        if scalars is not None:
            columns = np.concatenate([columns, scalars], axis=1)
        used: dict = {}
        coeffs, sums, source_plan = self._column_coefficients(used, sources, columns, fixed_sources)
        totals = sums[:, -1]
        targets = np.ascontiguousarray(targets, dtype=float)
        synthesis = self._targets_plan(used, source_plan, targets, fixed_targets, max(self.degrees) + 1, k)
        out = np.empty((len(model.heads), targets.shape[0], k))
        for h in range(len(model.heads)):
            kernel = self._kernel_sets(h, coeffs)
            if kernel is None:  # a constant kernel: <A x, sum b> - sum s
                moved = targets @ np.asarray(matrix, dtype=float).T
                out[h] = moved @ totals[: d * k].reshape(d, k) - (totals[d * k:] if scalars is not None else 0.0)
                continue
            L = self.degrees[h]
            functions = resize(kernel, d, L)  # the sums' functions, degree L
            turned = np.einsum("ji,jk...->ik...", matrix, functions[: d * k].reshape((d, k) + functions.shape[1:]))
            moments = spectrum_for(d, L + 2).vector_moments(resize(turned, d, L + 2))  # x_j (A^T S)_i: [j, i, c]
            total = sum(moments[i, i] for i in range(d))  # (k,) + spectrum, degree L + 1
            if scalars is not None:
                total = total - resize(functions[d * k:], d, L + 1)
            sets = np.zeros((k,) + synthesis.spectrum.shape, dtype=complex)
            place(sets, total, slice(0, L + 2))
            out[h] = np.exp(self._head_terms(h).kappa) * synthesis.synthesis(sets).T
        self._batch_plans = used
        return out

    def _column_coefficients(self, used: dict, sources: np.ndarray, columns: np.ndarray, fixed: bool,
                             mixing: np.ndarray | None = None, degree: int | None = None
                             ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, Transform]]:
        """The coefficients (k,) + spectrum (degree :attr:`coefficient_degree`) of the k measures
        with weights ``columns`` (n_local, k) on ``sources``, every rank's, and their exact sums
        ``[sum w y, sum w]`` (k, d + 1), with one adjoint transform and one ``Allreduce``; and
        the sources with their transform (for targets that are the same points, :func:`plan_of`).
        With ``mixing`` (k', k), those of the measures ``columns @ mixing.T``, mixed on the
        coefficients and sums (linear in the weights); with ``degree``, only the coefficients up to
        that degree are needed (the direct sums leave the others 0)."""
        sources, columns = np.asarray(sources, dtype=float), np.asarray(columns, dtype=float)
        plan = self._batch_transform(used, "sources", sources, fixed, self.coefficient_degree, True, columns.shape[1])
        local = plan.adjoint(columns.T, degree)  # (k, n): the exact sums read columns as they are
        sums = np.concatenate([columns.T @ sources, columns.sum(axis=0)[:, None]], axis=1)  # (k, d + 1)
        flat = allreduce_sum(self.comm, np.concatenate([local.ravel().view(float), sums.ravel()]))
        coeffs, sums = flat[: -sums.size].view(complex).reshape(local.shape), flat[-sums.size:].reshape(sums.shape)
        if mixing is not None:
            mixing = np.asarray(mixing, dtype=float)
            coeffs = (mixing @ coeffs.reshape(len(coeffs), -1)).reshape((len(mixing),) + coeffs.shape[1:])
            sums = mixing @ sums
        return coeffs, sums, (sources, plan)

    def _targets_plan(self, used: dict, source_plan: tuple[np.ndarray, Transform], targets: np.ndarray,
                      fixed: bool, L: int, functions: int) -> Transform:
        """The synthesis transform of degree at least L at the targets: the sources' plan when
        they are the same points, else one of degree L kept for fixed targets, for ``functions``
        functions at a time."""
        shared = plan_of([source_plan], targets)
        if shared is not None and shared.L >= L:
            return shared
        return self._batch_transform(used, "targets", targets, fixed, L, False, functions)

    def _batch_transform(self, used: dict, role: str, points: np.ndarray, fixed: bool, L: int,
                         adjoint: bool, functions: int) -> Transform:
        """The transform of ``points`` at degree L for the batched calls of ``functions``
        measures or functions at once: for a fixed point set whose harmonics fit
        :data:`BATCH_DIRECT_BYTES` per rank (over all ranks, so every rank chooses alike:
        collective when a plan is made) and at least :data:`BATCH_DIRECT_FUNCTIONS_PER_BASIS`
        functions per basis value, the direct sums (:class:`~.transforms.DirectTransform`: one
        matrix product for all of them, cheaper per function than a NUFFT, and exact); else a
        NUFFT as :meth:`evaluate_groups` plans.  Kept per fixed group and kind apart from
        :meth:`evaluate_groups`' plans."""
        basis = basis_size(self.model.d, L)
        many = functions >= basis * BATCH_DIRECT_FUNCTIONS_PER_BASIS
        key = (role, L, array_key(points) if fixed else None, many)
        plan = self._batch_plans.get(key) if fixed else None
        if plan is None:
            total = float(allreduce_sum(self.comm, np.array([float(points.shape[0])]))[0]) if fixed and many else np.inf
            ranks = 1 if self.comm is None else self.comm.size
            direct = batch_takes_exact_sums(self.model.d, total, L, functions, ranks)
            plan = DirectTransform(points, L) if direct else point_transform(
                np.ascontiguousarray(points, dtype=float), L, self.epsilon, adjoint, self.direct_sums and fixed)
        if fixed:
            used[key] = plan
        return plan

    def _synthesised(self, h: int, coeffs: np.ndarray, synthesis: Transform) -> np.ndarray:
        """Values (sets, m) at the synthesis's points of head h's kernel sums, degrees up to L_h
        (scaled by ``exp(-kappa)``), of the coefficient sets ``coeffs`` (sets,) + spectrum; a head
        whose kernel is not constant."""
        kernel = self._kernel_sets(h, coeffs)
        assert kernel is not None, "a constant kernel has no sets to synthesise"
        sets = np.zeros((coeffs.shape[0],) + synthesis.spectrum.shape, dtype=complex)
        place(sets, kernel, slice(0, self.degrees[h] + 1))
        return synthesis.synthesis(sets)

    def _kernel_sets(self, h: int, coeffs: np.ndarray) -> np.ndarray | None:
        """The coefficient sets of head h's kernel sums of measures with coefficients ``coeffs``
        (scaled by ``exp(-kappa)``; degrees up to L_h + 1), or ``None`` for a constant kernel."""
        terms, L = self._head_terms(h), self.degrees[h]
        if terms.kappa == 0.0:
            return None
        stack = coeffs[(slice(None),) + (slice(0, L + 2),) * (coeffs.ndim - 1)]
        if terms.rotation is not None:
            stack = spectrum_for(self.model.d, L + 1).rotate(stack, terms.rotation)
        return stack * terms.multipliers

    def _estimate(self) -> float | None:
        """The a-posteriori estimate of the last evaluation at this rank's sampled targets (see
        the module docstring): the largest first-order change of the velocity by the first
        neglected degree (and, for spectral heads, the NUFFTs' error), relative to the largest
        velocity; None before an evaluation or where the velocity vanishes."""
        model = self.model
        worst, scale = 0.0, 0.0
        for record in self._estimate_inputs:
            n = record.points.shape[0]
            if n == 0:
                continue
            change = np.zeros(n)  # sum over heads of |dX_h|
            if record.heads:
                probe = record.probe or point_transform(record.points, record.degree, self.epsilon, False, fixed=False)
                neglected = self._synthesise(probe, record.heads, ("neglected",))[0]
                for s, GF, dGF in zip(record.heads, record.fields, neglected):
                    dX = self._first_order_change(s.index, GF, dGF, np.full(n, s.kappa), record.points)
                    if s.constant is None:
                        dX = dX + self._transform_change(s.index, GF, s.kappa, record.epsilon)
                    change += abs(model.heads[s.index].weight) * dX
            for h, sums, extra, kappa in record.expanded:
                change += abs(model.heads[h].weight) * self._first_order_change(h, sums, extra, kappa, record.points)
            assert record.values is not None  # set by the evaluation that made the record
            worst = max(worst, float(change.max()))
            scale = max(scale, float(np.abs(record.values.velocity(model, record.points)).max()))
        return worst / scale if scale > 0 else None

    def _values(self, sums: Sequence[tuple[np.ndarray, float]], m: int) -> FieldValues:
        """The values of every head from its scaled sums ``[G, F]`` (d + 1, m) and shift; a single
        head with a plain V takes its sums' rows as they are (no copy)."""
        d = self.model.d
        if len(sums) == 1 and self._plain_V[0]:
            (GF, kappa), = sums
            return FieldValues(GF[None, :d].transpose(0, 2, 1), GF[None, d], np.broadcast_to(kappa, (1, m)))
        values = FieldValues.empty(len(sums), m, d)
        for h, (GF, kappa) in enumerate(sums):
            self._store(values, h, GF, kappa)
        return values

    def _store(self, values: FieldValues, h: int, sums: np.ndarray, kappa: np.ndarray | float) -> None:
        """Write head h's scaled sums ``[G, F]`` (shape (d + 1, m)) as N = V G, Z = F."""
        d, V = self.model.d, self.model.heads[h].V
        values.N[h].T[...] = sums[:d] if self._plain_V[h] else V @ sums[:d]
        values.Z[h] = sums[d]
        values.log_scale[h] = kappa

    def _first_order_change(
        self, h: int, sums: np.ndarray, extra: np.ndarray, kappa: np.ndarray, targets: np.ndarray
    ) -> np.ndarray:
        """``|dX_h|`` per target (unit head weight): the first-order effect on the velocity of
        adding ``extra`` (the first neglected degree's part, shape (d + 1, m)) to the scaled
        sums ``sums`` (shape (d + 1, m))."""
        d, V = self.model.d, self.model.heads[h].V
        N, Z = (V @ sums[:d]).T, sums[d]
        dN, dZ = (V @ extra[:d]).T, extra[d]
        change = self.model.kind.first_order_change(N, Z, dN, dZ, kappa)
        change = change - np.einsum("ij,ij->i", targets, change)[:, None] * targets
        return np.linalg.norm(change, axis=1)

    def _transform_change(self, h: int, sums: np.ndarray, kappa: float, epsilon: float) -> np.ndarray:
        """The NUFFTs' effect on ``|X_h|`` per target (unit head weight), for errors of
        ``epsilon`` relative to the local ``|G|`` and ``F`` (measured: at most 0.8 epsilon of
        the largest value on S^1 and 0.2 epsilon on S^2, adjoint and synthesis together); zero
        for exact sums (``epsilon = 0``: :class:`~.transforms.DirectTransform` both ways)."""
        d = self.model.d
        normV = self._norms_V[h]
        G, F = np.linalg.norm(sums[:d], axis=0), sums[d]
        if epsilon == 0.0:
            return np.zeros_like(F)
        return self.model.kind.transform_change(normV, epsilon, G, F, kappa)

    # -- energy --------------------------------------------------------------------------
    def energy(self, sources: Sequence[PointGroup]) -> float:
        """Interaction energy (see :meth:`NonlocalEvaluator.energy`) to :data:`ENERGY_TOL`.

        With only spectral heads it comes from the measure's coefficients alone,
        ``sum_i w_i Z_h(x_i) = sum_l mult_l(kappa_h) sum_m conj(c_lm) c'_lm`` (``c'`` the
        coefficients of the measure moved by ``O_h``): one adjoint transform per point group
        (at the NUFFT's best accuracy) and no target basis.  Otherwise the field is evaluated
        at the source points by the exact expansion at :data:`ENERGY_TOL`.
        """
        model, d = self.model, self.model.d
        tol = min(self.tol, ENERGY_TOL)
        if not self.transforms or len(self.spectral_heads) < len(model.heads):
            if self.tol <= ENERGY_TOL:
                return super().energy(sources)
            if self._exact is None:
                # streams its basis (no second cache next to the field's)
                self._exact = FastEvaluator(model, self.comm, ENERGY_TOL, cache_bytes=0,
                                            direct_sums=self.direct_sums)
            return self._exact.energy(sources)
        factors = [self._factor(h) for h in range(len(model.heads))]  # every head is spectral here
        degrees = [truncation_degree(d, model.beta * f[0], tol) for f in factors]
        L = max(degrees)
        used: dict = {}
        coeffs = self._measure(self._energy_plans, used, sources, L, EPSILON_FLOOR)[0].coefficients
        self._energy_plans = used
        total = 0.0
        for head, (c, R), Lh in zip(model.heads, factors, degrees):
            spectrum = spectrum_for(d, Lh)
            a = resize(coeffs, d, Lh)
            moved = a if np.array_equal(R, np.eye(d)) else spectrum.rotate(a, R)
            kappa = model.beta * c
            pair = spectrum.pairing(a, moved)
            total += head.weight * np.exp(kappa) * float(kernel_multipliers(d, Lh, kappa) @ pair)
        return total / (2.0 * model.beta)

    # -- diagnostics ------------------------------------------------------------------------
    def diagnostics(self) -> dict:
        """Method, tolerance, degrees per head, which heads use transforms, the a-priori
        tail ratio of the truncation rule and ``error_estimate`` (this rank's targets, last
        call)."""
        tails = [
            float(tail_ratios(self.model.d, k, L + int(k) + 60)[L])
            for L, k in zip(self.degrees, self.kmax)
        ]
        return {
            "method": self.name,
            "tol": self.tol,
            "degree": max(self.degrees),
            "degrees": list(self.degrees),
            "transform_heads": self.spectral_heads,
            "nufft_epsilon": self.epsilon if self.spectral_heads else None,
            "kappa_max": [float(k) for k in self.kmax],
            "a_priori_tail": max(tails),
            "error_estimate": self._estimate(),
        }

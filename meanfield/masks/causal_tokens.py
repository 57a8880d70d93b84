"""Causal (decoder) attention for tokens: token i attends to the tokens j <= i only.

Token i (0-based here; ``i + 1`` in ``MODEL.md``) sits at position ``s_i = (i + 1/2) / n`` (the
midpoints of n slices, :func:`meanfield.sequence.slice_positions`) and
moves with the field of the tokens up to and including itself,

    X_i = P_{x_i}( sum_{j<=i} w_j e^{beta <Q x_i, K x_j>} V x_j / sum_{j<=i} w_j e^{beta <Q x_i, K x_j>} )  (SA),
    X_i = P_{x_i}( sum_{j<=i} w_j e^{beta <Q x_i, K x_j>} V x_j )                                         (USA),

``w_j = 1/n``: under SA the weights cancel, under USA they are the ``1/n`` of ``MODEL.md``.  Heads
are summed with their weights and the feed-forward block added, as for the non-causal model.

Positional decay (ALiBi) ``lambda`` multiplies token j's weight in token i's sums by
``e^{-lambda (s_i - s_j)}``; ``normalise`` (unnormalised attention) divides token i's sums by
its positional mass ``sum_{j<=i} w_j e^{-lambda (s_i - s_j)}`` (the model of Duerinckx,
Geshkovski and Rossi, :mod:`meanfield.masks.causal_slices`).  Block k's sums are taken with the weights
``w_j e^{-lambda (r_k - s_j)}`` relative to the block's first position ``r_k`` and shifted by
``-lambda (s_i - r_k)`` in their ``log_scale`` (nothing overflows); the fast route's prefix of
summaries is then the recursively weighted sum ``P_{k+1} = e^{-lambda (r_{k+1} - r_k)} P_k + S_k``.

The tokens are cut into global blocks of :attr:`CausalTokenField.block` consecutive tokens.
Token i in block k gets the sums over the tokens before the block (``j < k b``, the *prefix*)
plus the masked sums over its own block (``k b <= j <= i``, direct and exact), added at a common
scale (:class:`meanfield.masks.causal_slices.PrefixSums`).  The prefix is evaluated

``direct``
    by the direct sums (:func:`~meanfield.nonlocal_field.direct_sums`, tiled: memory
    ``O(block x block_sources)``), ``O(n^2 / 2)`` work in all;
``fast``
    from the prefix of the source *summaries*: the harmonic coefficients (spectral heads) or
    basis moments (other heads) of the fast evaluator (:mod:`meanfield.nonlocal_field.fast`),
    linear in the measure.  Each block's summary is computed once (one adjoint transform of
    its ``b`` tokens), accumulated block by block, and block k's targets get one synthesis
    from the summary of the blocks before it: ``n / b`` transforms of ``b`` points, not ``n``
    transforms of up to ``n`` points.

MPI: rank r owns the contiguous tokens :func:`~meanfield.particles.system.token_block`; every
rank gathers all tokens (one ``Allgatherv``), so that blocks are global (the split of a token's
sum into prefix and own block does not depend on the rank count).  Rank r sums the summaries
of the blocks that start in ``[b floor(start_r / b), b floor(stop_r / b))``, and an exclusive
scan of these (each rank's total gathered and weighted by the decay to this rank's first block)
gives every rank the summary of all blocks before its first one; 1 and P ranks then differ by
the order of the additions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..model import AttentionModel
from ..nonlocal_field.auto import AutoEvaluator, estimated_costs
from ..nonlocal_field.base import FieldValues, NonlocalEvaluator
from ..nonlocal_field.direct import direct_sums
from ..nonlocal_field.expansion import BasisCache, exact_moments, target_sums
from ..nonlocal_field.fast import FastEvaluator, resize
from ..nonlocal_field.harmonics import SUPPORTED_DIMENSIONS, basis_size
from ..nonlocal_field.parallel import allgather_rows
from ..nonlocal_field.spectral import kernel_multipliers, spectrum_for
from ..nonlocal_field.transforms import PointTransform
from ..sequence import position, slice_positions
from ..velocity import LayerVelocity
from .causal_slices import PrefixSums

#: Tokens per block: balances the fast route's fixed cost per block (a transform and the
#: coefficient algebra, about a millisecond) against the direct sums within a block.
DEFAULT_BLOCK = 256


@lru_cache(maxsize=4)
def _later(m: int) -> np.ndarray:
    """The mask of the pairs (i, j > i) of a block of m tokens (read-only)."""
    mask = np.triu(np.ones((m, m), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def masked_block_sums(model: AttentionModel, points: np.ndarray, weights: np.ndarray) -> FieldValues:
    """The scaled sums of token i over the tokens ``j <= i`` of one block (in order), shape as
    :class:`FieldValues`, with the attention kind's kernel (``log_scale``: its shift of the row,
    the largest exponent for ``exp``, the token itself included)."""
    m, d = points.shape
    H = len(model.heads)
    values = FieldValues(np.empty((H, m, d)), np.empty((H, m)), np.empty((H, m)))
    later = _later(m)
    for h, head in enumerate(model.heads):
        E = (model.beta * (points @ head.Q.T)) @ (points @ head.K.T).T
        E[later] = -np.inf
        W, top = model.kind.weights(E)
        rhs = np.column_stack([weights[:, None] * (points @ head.V.T), weights])
        sums = W @ rhs
        values.N[h], values.Z[h], values.log_scale[h] = sums[:, :d], sums[:, d], top
    return values


def _added(a: FieldValues, b: FieldValues) -> FieldValues:
    sums = PrefixSums()
    sums.add(a, 1.0)
    return sums.plus(b, 1.0)


def _rows(values: FieldValues, rows: slice) -> FieldValues:
    return FieldValues(values.N[:, rows], values.Z[:, rows], values.log_scale[:, rows])


def _exclusive_scan(comm, local: np.ndarray, end: float, start: float, decay: float) -> np.ndarray:
    """Sum over the ranks q before this one of ``e^{-decay (start - end_q)} local_q`` (zeros on
    rank 0 and without MPI): ``local_q`` is rank q's total relative to the position ``end_q``,
    the result is relative to this rank's ``start``."""
    if comm is None or comm.size == 1:
        return np.zeros_like(local)
    out = np.zeros_like(local)
    for total, at in comm.allgather((np.ascontiguousarray(local), end))[: comm.rank]:
        out += np.exp(-decay * (start - at)) * total
    return out


@dataclass(frozen=True)
class PositionalDecay:
    """Positional decay ``lambda`` and normalisation of causal tokens (see the module docstring)."""

    rate: float = 0.0
    normalise: bool = False

    def reference(self, layout: TokenLayout, k: int) -> float:
        """The position ``r_k`` of block k's first token (also past the last block)."""
        return float(position(k * layout.block, layout.n))

    def relative(self, weights: np.ndarray, positions: np.ndarray, at: float) -> np.ndarray:
        """``weights * e^{-lambda (at - positions)}``."""
        return weights * np.exp(-self.rate * (at - positions)) if self.rate > 0 else weights

    def shift(self, values: FieldValues, positions: np.ndarray, at: float, mass: np.ndarray | None) -> FieldValues:
        """``values`` (relative to ``at``) multiplied by ``e^{-lambda (positions - at)}``, and
        divided by the targets' positional mass when given."""
        shift = -self.rate * (positions - at)
        if mass is not None:
            shift = shift - np.log(mass)
        return FieldValues(values.N, values.Z, values.log_scale + shift)

    def masses(self, weights: np.ndarray) -> np.ndarray | None:
        """Every token's positional mass ``sum_{j<=i} w_j e^{-lambda (s_i - s_j)}`` (all n,
        global order), or ``None`` without normalisation."""
        if not self.normalise:
            return None
        from scipy.signal import lfilter  # here: scipy.signal brings scipy.stats, a second of imports

        return lfilter([1.0], [1.0, -np.exp(-self.rate / weights.size)], weights)


def token_positions(n: int) -> np.ndarray:
    """The positions ``s_i = (i + 1/2) / n`` of n tokens."""
    return slice_positions(n)


@dataclass(frozen=True)
class TokenLayout:
    """Where this rank's tokens sit among all n: global range ``[start, stop)`` and blocks of ``block``."""

    n: int
    start: int
    stop: int
    block: int

    @classmethod
    def of(cls, comm, local: int, block: int) -> TokenLayout:
        """The layout of ``local`` tokens on this rank, ranks in global order (collective)."""
        if comm is None or comm.size == 1:
            return cls(local, 0, local, block)
        counts = comm.allgather(local)
        start = sum(counts[: comm.rank])
        return cls(sum(counts), start, start + local, block)

    def blocks(self) -> range:
        """The global blocks that hold this rank's tokens."""
        return range(self.start // self.block, (self.stop - 1) // self.block + 1 if self.stop > self.start else 0)

    def span(self, k: int) -> slice:
        """The global tokens of block k."""
        return slice(k * self.block, min((k + 1) * self.block, self.n))

    def summed_here(self, k: int) -> bool:
        """Whether this rank adds block k's summary into the scan: the blocks that start in
        ``[b floor(start / b), b floor(stop / b))`` (each block on exactly one rank)."""
        return self.start // self.block <= k < self.stop // self.block

    def owned(self, k: int) -> tuple[slice, slice]:
        """Rows of block k this rank owns: as rows of the block and as local token indices."""
        span = self.span(k)
        lo, hi = max(span.start, self.start), min(span.stop, self.stop)
        return slice(lo - span.start, hi - span.start), slice(lo - self.start, hi - self.start)


class FastSummaries:
    """The source summaries of the fast route and the field they give (see the module docstring).

    A summary is one real vector, linear in the measure: the complex harmonic coefficients
    (degree ``max L_h + 1``) when some head is spectral, the basis moments (degree
    ``max L_h + 1``) when some head is not, and ``[sum w y, sum w]`` (heads with a constant
    kernel).

    Parameters
    ----------
    fast
        The fast evaluator whose degrees, heads' factors and NUFFT accuracy are used.
    """

    def __init__(self, fast: FastEvaluator) -> None:
        self.fast = fast
        model, d = fast.model, fast.model.d
        self.spectral = fast.spectral_heads
        self.expansion = [h for h in range(len(model.heads)) if h not in self.spectral]
        self.L = max(fast.degrees) + 1
        self.spectrum = spectrum_for(d, self.L)
        self.coefficient_size = 2 * int(np.prod(self.spectrum.shape)) if self.spectral else 0
        self.moment_shape = (basis_size(d, self.L), d + 1) if self.expansion else (0, d + 1)
        self.cache = BasisCache(0)
        #: Per spectral head with a kernel (kappa > 0): the kernel's factors per degree, shaped to
        #: multiply a stack of coefficient sets.
        self.multipliers: dict[int, np.ndarray] = {}
        for h in self.spectral:
            factor = fast.factors[h]
            assert factor is not None  # a spectral head
            kappa = model.beta * factor[0]
            if kappa > 0.0:
                mult = kernel_multipliers(d, fast.degrees[h], kappa)
                self.multipliers[h] = mult[:, None] if d == 3 else mult

    @property
    def width(self) -> int:
        """The length of a summary."""
        return self.fast.model.d + 1 + self.coefficient_size + int(np.prod(self.moment_shape))

    def plan(self, points: np.ndarray) -> PointTransform | None:
        """The transform of a block's points (None without spectral heads)."""
        return PointTransform(np.ascontiguousarray(points), self.L, self.fast.epsilon) if self.spectral else None

    def summary(self, plan: PointTransform | None, points: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The summary of ``sum_j w_j delta_{y_j}`` over one block."""
        parts = [np.concatenate([weights @ points, [weights.sum()]])]
        if plan is not None:
            parts.append(plan.adjoint(weights).ravel().view(float))
        if self.expansion:
            parts.append(exact_moments(points, weights, self.L, self.cache, "causal", False).ravel())
        return np.concatenate(parts)

    def values(self, summary: np.ndarray, plan: PointTransform | None, points: np.ndarray) -> FieldValues:
        """The scaled sums at a block's points of the measure a summary describes."""
        model, d = self.fast.model, self.fast.model.d
        m = points.shape[0]
        values = FieldValues.empty(len(model.heads), m, d)
        sums = summary[: d + 1]
        moments = summary[d + 1 + self.coefficient_size :].reshape(self.moment_shape)
        if self.spectral:
            coefficients = summary[d + 1 : d + 1 + self.coefficient_size].view(complex).reshape(self.spectrum.shape)
            vector = self.spectrum.vector_moments(coefficients)
        for h in self.spectral:
            factor = self.fast.factors[h]
            assert factor is not None  # a spectral head
            c, R = factor
            kappa = model.beta * c
            if h not in self.multipliers:  # kappa = 0: a constant kernel
                fields = np.broadcast_to(sums[:, None], (d + 1, m))
            else:
                L = self.fast.degrees[h]
                stack = np.concatenate([resize(vector, d, L), resize(coefficients, d, L)[None]])
                if not np.array_equal(R, np.eye(d)):
                    stack = spectrum_for(d, L).rotate(stack, R)
                stack = stack * self.multipliers[h]
                assert plan is not None
                fields = plan.synthesis(resize(stack, d, plan.L))
            self._store(values, h, fields, kappa)
        for h in self.expansion:
            head = model.heads[h]
            fields, _, kappa_x = target_sums(points, head.interaction, model.beta, self.fast.degrees[h], moments,
                                             self.cache, ("causal", h), False)
            self._store(values, h, fields, kappa_x)
        return values

    def _store(self, values: FieldValues, h: int, fields: np.ndarray, kappa: np.ndarray | float) -> None:
        V = self.fast.model.heads[h].V
        values.N[h].T[...] = V @ fields[:-1]
        values.Z[h] = fields[-1]
        values.log_scale[h] = kappa


def causal_direct_sums(model: AttentionModel, tokens: np.ndarray, weights: np.ndarray,
                       layout: TokenLayout, decay: PositionalDecay = PositionalDecay()) -> FieldValues:
    """The masked sums at this rank's tokens by direct sums; ``tokens`` and ``weights`` are all
    n tokens (gathered, global order)."""
    local = layout.stop - layout.start
    out = FieldValues.empty(len(model.heads), local, model.d)
    s, masses = token_positions(layout.n), decay.masses(weights)
    for k in layout.blocks():
        span = layout.span(k)
        rows, where = layout.owned(k)
        targets = tokens[span][rows]
        r = decay.reference(layout, k)
        relative = decay.relative(weights[: span.stop], s[: span.stop], r)
        prefix = direct_sums(model, targets, tokens[: span.start], relative[: span.start])
        own = _rows(masked_block_sums(model, tokens[span], relative[span]), rows)
        _write(out, where, decay.shift(_added(prefix, own), s[span][rows], r,
                                       None if masses is None else masses[span][rows]))
    return out


def causal_fast_sums(summaries: FastSummaries, tokens: np.ndarray, weights: np.ndarray, layout: TokenLayout,
                     comm, decay: PositionalDecay = PositionalDecay()) -> FieldValues:
    """The masked sums at this rank's tokens from prefix summaries; ``tokens`` and ``weights``
    are all n tokens (gathered, global order).  Collective: one ``allgather``."""
    model = summaries.fast.model
    blocks = list(layout.blocks())
    s, masses = token_positions(layout.n), decay.masses(weights)
    plans = [summaries.plan(tokens[layout.span(k)]) for k in blocks]
    own_summaries = [summaries.summary(plan, tokens[layout.span(k)],
                                       decay.relative(weights[layout.span(k)], s[layout.span(k)],
                                                      decay.reference(layout, k + 1)))
                     if layout.summed_here(k) else None for k, plan in zip(blocks, plans)]
    end = decay.reference(layout, layout.stop // layout.block)
    total = np.zeros(summaries.width)
    for k, summary in zip(blocks, own_summaries):
        if summary is not None:
            total += np.exp(-decay.rate * (end - decay.reference(layout, k + 1))) * summary
    prefix = _exclusive_scan(comm, total, end, decay.reference(layout, layout.start // layout.block), decay.rate)
    out = FieldValues.empty(len(model.heads), layout.stop - layout.start, model.d)
    for k, plan, own_summary in zip(blocks, plans, own_summaries):
        span = layout.span(k)
        rows, where = layout.owned(k)
        r = decay.reference(layout, k)
        before = _rows(summaries.values(prefix, plan, tokens[span]), rows)
        own = _rows(masked_block_sums(model, tokens[span], decay.relative(weights[span], s[span], r)), rows)
        _write(out, where, decay.shift(_added(before, own), s[span][rows], r,
                                       None if masses is None else masses[span][rows]))
        if own_summary is not None:
            prefix = np.exp(-decay.rate * (decay.reference(layout, k + 1) - r)) * prefix + own_summary
    return out


def _write(out: FieldValues, where: slice, values: FieldValues) -> None:
    out.N[:, where], out.Z[:, where], out.log_scale[:, where] = values.N, values.Z, values.log_scale


class CausalTokenField:
    """The velocity of causal tokens: the active layer's masked attention plus its feed-forward block.

    Called like a :data:`~meanfield.model.VelocityField` with this rank's tokens, in global
    order, as both targets and sources (:class:`~meanfield.particles.system.ParticleSystem`
    does); collective.

    Parameters
    ----------
    field
        The layer velocity of the particle run: its active layer's evaluator chooses the route
        (``direct``; ``fast``; ``auto``: the fast route where the non-causal cost model prefers
        the fast evaluator for half the sources) and its tolerance, and gives the feed-forward block.
    comm
        MPI communicator of the tokens (``None``: serial).
    block
        Tokens per block (see the module docstring).
    decay
        The positional decay and normalisation.
    """

    def __init__(self, field: LayerVelocity, comm=None, block: int = DEFAULT_BLOCK,
                 decay: PositionalDecay = PositionalDecay()) -> None:
        if block < 1:
            raise ValueError(f"causal tokens: block must be >= 1, got {block!r}")
        self.field, self.comm, self.block, self.decay = field, comm, block, decay
        self._route: tuple[NonlocalEvaluator, FastSummaries | None] | None = None

    def route(self, evaluator: NonlocalEvaluator, n: int) -> FastSummaries | None:
        """The fast route's summaries for the active evaluator, or None for the direct route."""
        if self._route is None or self._route[0] is not evaluator:
            fast: FastEvaluator | None = None
            if isinstance(evaluator, FastEvaluator):
                fast = evaluator
            elif isinstance(evaluator, AutoEvaluator) and evaluator.model.d in SUPPORTED_DIMENSIONS \
                    and evaluator.model.kind.exponential:
                candidate = FastEvaluator(evaluator.model, self.comm, evaluator.tol)
                costs = estimated_costs(candidate, n, n // 2 + 1, False, False)
                fast = candidate if costs["fast"] < costs["direct"] else None
            self._route = (evaluator, None if fast is None else FastSummaries(fast))
        return self._route[1]

    def sums(self, tokens: np.ndarray, weights: np.ndarray) -> FieldValues:
        """The masked scaled sums at this rank's tokens (collective)."""
        evaluator = self.field.evaluator
        assert evaluator is not None, "the active layer has no attention"
        layout = TokenLayout.of(self.comm, tokens.shape[0], self.block)
        every = allgather_rows(self.comm, np.ascontiguousarray(tokens, dtype=float))
        all_weights = allgather_rows(self.comm, np.ascontiguousarray(weights, dtype=float))
        summaries = self.route(evaluator, layout.n)
        if summaries is None:
            return causal_direct_sums(evaluator.model, every, all_weights, layout, self.decay)
        return causal_fast_sums(summaries, every, all_weights, layout, self.comm, self.decay)

    def __call__(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """X_i at this rank's tokens; ``targets`` must be the ``sources`` (the tokens)."""
        if targets is not sources and not np.array_equal(targets, sources):
            raise ValueError("causal tokens: the targets must be the tokens themselves")
        evaluator, ffn = self.field.evaluator, self.field.layer.ffn
        if evaluator is None:
            return np.zeros_like(targets) if ffn is None else ffn.velocity(targets)
        X = self.sums(sources, weights).velocity(evaluator.model, targets)
        return X if ffn is None else X + ffn.velocity(targets)


"""Direct O(targets x sources) evaluation of the attention sums.

The logits ``beta <Q x, K y>`` of a block of targets against a block of sources are one
matrix product (BLAS); the weighted sums ``sum_j k_ij [w_j V y_j, w_j]`` are a second one, with
the attention kind's kernel ``k`` (:meth:`~meanfield.attention.Attention.kernel_sums`).
Memory is bounded by ``block_targets x block_sources`` whatever the problem size.  For the
exponential kernel overflow is avoided by an online log-sum-exp
(:func:`~meanfield.attention.exp_sums`), so the returned sums are exact and scaled by
``exp(-max exponent)``.

Under MPI each rank evaluates its own targets against all sources, gathered with one
``Allgatherv`` per group and evaluation (only the weights for a fixed group seen before).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model import AttentionModel
from .base import FieldValues, NonlocalEvaluator, PointGroup, array_key, mixed
from .parallel import allgather_rows


def direct_sums(
    model: AttentionModel,
    targets: np.ndarray,
    sources: np.ndarray,
    weights: np.ndarray,
    block_targets: int = 256,
    block_sources: int = 2048,
) -> FieldValues:
    """Serial direct evaluation of the scaled sums (see :class:`FieldValues`).

    Parameters
    ----------
    model
        Attention model.
    targets, sources
        Shapes (m, d) and (n, d).
    weights
        Shape (n,), source weights.
    block_targets, block_sources
        Tile sizes; memory use is about ``8 * block_targets * block_sources`` bytes.
    """
    m, d = targets.shape
    H = len(model.heads)
    N = np.zeros((H, m, d))
    Z = np.zeros((H, m))
    log_scale = np.full((H, m), -np.inf)
    n = sources.shape[0]
    if n == 0 or m == 0:
        return FieldValues(N, Z, log_scale)
    for h, head in enumerate(model.heads):
        # right-hand side of the sums: [w V y, w], one matrix product gives N and Z
        rhs = np.empty((n, d + 1))
        rhs[:, :d] = weights[:, None] * (sources @ head.V.T)
        rhs[:, d] = weights
        acc, log_scale[h] = model.kind.kernel_sums(model.beta * (targets @ head.Q.T), sources @ head.K.T, rhs,
                                                   block_targets, block_sources)
        N[h], Z[h] = acc[:, :d], acc[:, d]
    return FieldValues(N, Z, log_scale)


class DirectEvaluator(NonlocalEvaluator):
    """Exact evaluation against all sources; cost O(targets x all sources) per call."""

    name = "direct"

    def __init__(
        self,
        model: AttentionModel,
        comm=None,
        block_targets: int = 256,
        block_sources: int = 2048,
    ) -> None:
        super().__init__(model, comm)
        self.block_targets = block_targets
        self.block_sources = block_sources
        self._gathered: dict[tuple, np.ndarray] = {}

    def _all_sources(self, groups: Sequence[PointGroup]) -> np.ndarray:
        """Every rank's source points, group by group (fixed groups gathered once)."""
        keys = [array_key(g.points) if g.fixed else None for g in groups]
        hits = np.array([k is not None and k in self._gathered for k in keys], dtype=np.int32)
        if self.comm is not None and self.comm.size > 1:
            from mpi4py import MPI

            local, hits = hits, np.empty_like(hits)
            self.comm.Allreduce(local, hits, op=MPI.MIN)  # every rank must skip a gather, or none
        parts, kept = [], {}
        for g, key, hit in zip(groups, keys, hits):
            if hit:
                assert key is not None  # a hit is a fixed group (it has a key) gathered before
                points = self._gathered[key]
            else:
                points = allgather_rows(self.comm, np.ascontiguousarray(g.points, dtype=float))
            if key is not None:
                kept[key] = points
            parts.append(points)
        self._gathered = kept
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def evaluate_groups(
        self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]
    ) -> list[FieldValues]:
        """See :meth:`NonlocalEvaluator.evaluate_groups` (nothing is derived from the targets)."""
        points = self._all_sources(sources)
        weights = np.concatenate(
            [allgather_rows(self.comm, np.ascontiguousarray(g.weights, dtype=float)) for g in sources]
        )
        return [
            direct_sums(self.model, t.points, points, weights, self.block_targets, self.block_sources)
            for t in targets
        ]

    def partition_sums(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        columns: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> np.ndarray:
        """See :meth:`NonlocalEvaluator.partition_sums`: every column in one pass per head (the
        sources and columns gathered once)."""
        points = self._all_sources([PointGroup(np.asarray(sources, dtype=float), None, fixed_sources)])
        every = allgather_rows(self.comm, np.ascontiguousarray(columns, dtype=float))
        targets = np.asarray(targets, dtype=float)
        out = np.empty((len(self.model.heads), targets.shape[0], every.shape[1]))
        for h, head in enumerate(self.model.heads):
            sums, log_scale = self.model.kind.kernel_sums(self.model.beta * (targets @ head.Q.T), points @ head.K.T,
                                                          every, self.block_targets, self.block_sources)
            out[h] = sums * np.exp(np.where(np.isfinite(log_scale), log_scale, 0.0))[:, None]
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
        """See :meth:`NonlocalEvaluator.velocities`: per head, the kernel of the targets
        against the sources once, multiplied by the ``(d + 1) k`` columns ``[w V y, w]`` of all
        the measures in one matrix product."""
        points = self._all_sources([PointGroup(np.asarray(sources, dtype=float), None, fixed_sources)])
        every = mixed(allgather_rows(self.comm, np.ascontiguousarray(columns, dtype=float)), mixing)
        targets = np.asarray(targets, dtype=float)
        (n, k), (m, d), H = every.shape, targets.shape, len(self.model.heads)
        N, Z, log_scale = np.zeros((k, H, m, d)), np.zeros((k, H, m)), np.full((k, H, m), -np.inf)
        for h, head in enumerate(self.model.heads):
            moved = points @ head.V.T
            rhs = np.concatenate([(every[:, :, None] * moved[:, None, :]).reshape(n, k * d), every], axis=1)
            if n and m:
                acc, log_scale[:, h] = self.model.kind.kernel_sums(self.model.beta * (targets @ head.Q.T),
                                                                   points @ head.K.T, rhs, self.block_targets,
                                                                   self.block_sources)
                N[:, h] = acc[:, : k * d].reshape(m, k, d).transpose(1, 0, 2)
                Z[:, h] = acc[:, k * d:].T
        if not k:
            return np.zeros((0, m) + (directions.shape[1:-1] if directions is not None else (d,)))
        return np.stack([FieldValues(N[c], Z[c], log_scale[c]).velocity(self.model, targets, directions)
                         for c in range(k)])

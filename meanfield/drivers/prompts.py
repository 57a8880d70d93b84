"""A batch of prompts as a run: ``[particles] prompts = B`` (or ``device = "gpu"``, ``precision = "float32"``).

The state is B independent prompts of n tokens, (B, n, d), moved by the batched engine
(:mod:`meanfield.particles.batch`) on the array library and device of ``particles.device``;
prompt b is the single run with ``particles.seed + b`` (and ``model.random.seed + b`` with
``[model.random] per_prompt = true``, :mod:`meanfield.particles.prompts`), taking the same
equal steps between the same output times and layer boundaries.

Files: each output's snapshot holds the tokens ``points`` (B, n, d) and each prompt's scalars
``<name>_by_prompt`` (B,) (:data:`~meanfield.rundir.netcdf.PROMPT_SCALARS`); the observables.csv
row holds their means over the prompts and, for each scalar, ``<name>_se``, the standard
error of the mean (sample standard deviation over sqrt(B); nan for one prompt); run.nc the
same along a ``prompt`` dimension (:mod:`meanfield.rundir.netcdf`).

MPI: the prompts are split over the ranks in contiguous blocks (:func:`token_block`); a rank
holds whole prompts, so the trajectories do not depend on the rank count (to round-off: the
same numbers in another chunking).  With fewer prompts than ranks the ranks beyond the last
prompt hold none.  The prompts of a rank move in chunks of
:meth:`~meanfield.particles.batch.PromptBatch.chunk` prompts, each held on the engine's device
between outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..collective import on_root
from ..config import ConfigError
from ..engine.simulation import Simulation
from ..observables import moment_observables
from ..particles.arrays import ArrayBackend
from ..particles.batch import CompiledSteps, LayerArrays
from ..particles.integrator import residual_steps
from ..particles.pairs import pair_observables
from ..particles.prompts import check_batch, prompt_batch
from ..particles.system import token_block
from ..problem import Problem
from ..rundir.layout import BY_PROMPT
from ..rundir.netcdf import PROMPT_SCALARS
from .token_steps import EqualStepping, scatter_tokens


def prompt_energies(xp: Any, layer: LayerArrays, params: dict[str, Any], x: Any) -> np.ndarray:
    """(P,) each prompt's interaction energy ``sum_h weight_h / (2 beta) mean_ij exp(beta <Q_h x_i, K_h x_j>)``
    (:mod:`meanfield.observables`, no mask) under ``layer``; nan without attention."""
    structure = layer.structure
    if structure.attention is None:
        return np.full(x.shape[0], np.nan)
    xa = x[:, None]
    left = xa @ params["A"] if structure.interaction else xa
    kernel = xp.exp(params["beta"] * (left @ xp.swapaxes(xa, -1, -2)))  # (P, H, n, n)
    per_head = xp.mean(kernel, axis=(-1, -2))
    return np.asarray(per_head @ params["w"]) / (2.0 * float(params["beta"]))


def prompt_rows(points: np.ndarray, energies: np.ndarray) -> dict[str, np.ndarray]:
    """Each prompt's observables (name -> (P,)): the single run's measure observables and pair
    statistics of its tokens, with its ``energy``."""
    rows = [{**moment_observables(None, x, np.full(len(x), 1.0 / len(x))), **pair_observables(x)} for x in points]
    names = list(rows[0]) if rows else list(PROMPT_SCALARS)
    out = {name: np.array([r.get(name, np.nan) for r in rows], float) for name in names}
    out["energy"] = np.asarray(energies, float)
    return out


def prompt_summary(values: dict[str, np.ndarray]) -> dict[str, float]:
    """The means over the prompts, then ``<name>_se`` of each of :data:`PROMPT_SCALARS`: the standard
    error of the mean (nan for one prompt)."""
    count = len(next(iter(values.values())))
    row = {name: float(np.mean(v)) for name, v in values.items()}
    for name in PROMPT_SCALARS:
        v = values[name]
        row[f"{name}_se"] = float(np.std(v, ddof=1) / np.sqrt(count)) if count > 1 else float("nan")
    return row


class PromptSimulation(EqualStepping, Simulation):
    """B prompts of n tokens on S^{d-1}, moved together by the batched engine (module docstring).

    Parameters
    ----------
    problem
        The resolved problem; ``particles.n`` must be set.
    comm
        MPI communicator; the prompts are split in contiguous blocks.
    """

    run_type = "particles"

    def __init__(self, problem: Problem, comm) -> None:
        p = problem.particles
        if len(problem.output.own_observables):
            raise ConfigError("output.observables: observables of one's own are not evaluated in a batch of prompts "
                              "(particles.prompts > 1, or a GPU or float32); run the prompts one by one")
        check_batch(problem, p.prompts)
        if p.integrator == "residual":
            residual_steps(problem.random, problem.particles.dt, problem.time.output_times)  # outputs on layer ends
        self.backend = ArrayBackend.for_device(p.device, p.precision)
        self.problem, self.comm, self.t = problem, comm, 0.0
        self.batch = prompt_batch(problem, p.prompts)
        self.schedule = problem.schedule(p.d)
        self.n, self.seed, self.prompts = self.batch.n, p.seed, p.prompts
        self.block = token_block(self.prompts, comm.rank, comm.size)
        self.chunk = self.batch.chunk(self.backend)
        self.chunks = [range(a, min(a + self.chunk, self.block.stop))
                       for a in range(self.block.start, self.block.stop, self.chunk)]
        self.compiled = CompiledSteps(self.backend)
        with self.backend.context():
            self.layers = [self.batch.layers(c) for c in self.chunks]
            self.params = [[{k: self.backend.asarray(v) for k, v in layer.arrays.items()} for layer in layers]
                           for layers in self.layers]
        self._set_tokens(np.concatenate([self.batch.initial(c) for c in self.chunks])
                         if self.chunks else np.empty((0, self.n, self.batch.d)))
        self._last: dict[str, np.ndarray] | None = None  # the prompts' observables of the last output (rank 0)

    def _set_tokens(self, x: np.ndarray) -> None:
        """Hold this rank's prompts' tokens (P, n, d) on the engine's device, chunk by chunk."""
        first = self.block.start
        with self.backend.context():
            self.x = [self.backend.asarray(x[c.start - first:c.stop - first]) for c in self.chunks]

    def _tokens(self) -> np.ndarray:
        """This rank's prompts' tokens (P, n, d) on the host, float64."""
        if not self.x:
            return np.empty((0, self.n, self.batch.d))
        return np.concatenate([np.asarray(self.backend.to_numpy(x), float) for x in self.x])

    @property
    def dt(self) -> float:
        """The largest step allowed in every layer (the smallest of the layers' steps)."""
        return min(self.batch.dts)

    # -- stepping ------------------------------------------------------------------------
    def next_landing(self, t: float) -> float | None:
        return self.schedule.next_boundary(t)

    def step(self, t_end: float) -> float:
        layer = self.schedule.index_from(self.t)
        step = self.step_size(t_end, self.batch.dts[layer])
        drifts = [0.0]
        with self.backend.context():
            h = self.backend.asarray(step)
            for i, layers in enumerate(self.layers):
                loop = self.compiled(layers[layer].structure, self.batch.integrator)
                self.x[i], worst = loop(self.params[i][layer], self.x[i], self.backend.asarray(0.0), 1, h)
                drifts.append(float(worst))  # nan where a token became non-finite
        finite = bool(np.all(np.isfinite(drifts)))
        return self.step_taken(max(drifts) if finite else 0.0, finite)

    # -- observing -----------------------------------------------------------------------
    def _values(self) -> dict[str, np.ndarray] | None:
        """Every prompt's observables (name -> (B,)) on rank 0 (``None`` elsewhere) (collective)."""
        layer = self.schedule.index_until(self.t)
        with self.backend.context():
            energies = [prompt_energies(self.backend.xp, layers[layer], params[layer], x)
                        for layers, params, x in zip(self.layers, self.params, self.x)]
        local = prompt_rows(self._tokens(), np.concatenate(energies) if energies else np.empty(0))
        parts = self.comm.gather(local, root=0)
        if self.comm.rank != 0:
            return None
        return {name: np.concatenate([part[name] for part in parts if name in part]) for name in parts[0]}

    def observables(self) -> dict[str, float]:
        """The means over the prompts of their observables and the standard errors (module docstring)."""
        values = self._last = self._values()
        row = on_root(self.comm, lambda: prompt_summary(values))  # type: ignore[arg-type]
        row.update(rho_min=np.nan, rho_max=np.nan, dt=self.last_step())
        return row

    def _all_tokens(self) -> np.ndarray | None:
        parts = self.comm.gather(self._tokens(), root=0)
        return np.concatenate(parts) if self.comm.rank == 0 else None

    def snapshot(self) -> dict[str, np.ndarray] | None:
        """The tokens (B, n, d) and each prompt's scalars ``<name>_by_prompt`` (B,) of the output
        whose observables were taken last."""
        points = self._all_tokens()
        if points is None:
            return None
        values = self._last
        scalars = {} if values is None else {f"{name}{BY_PROMPT}": values[name] for name in PROMPT_SCALARS}
        return {"points": points, **scalars}

    def checkpoint_state(self) -> dict[str, np.ndarray] | None:
        points = self._all_tokens()
        return None if points is None else {"points": points}

    def restore(self, t: float, state: dict[str, np.ndarray] | None, info: dict[str, Any]) -> None:
        self._set_tokens(scatter_tokens(self.comm, state, (self.prompts, self.n, self.batch.d)))
        self.t = t
        self.restore_steps(info)

    # -- facts -----------------------------------------------------------------------------
    def describe(self) -> str:
        weights = "weights per prompt" if self.batch.own_weights else "shared weights"
        return (f"{self.prompts} prompts of {self.n} tokens on S^{self.batch.d - 1}, {self.batch.integrator} "
                f"dt <= {self.dt:.4g}, batched engine ({self.backend.describe()}, chunks of {self.chunk} prompts), "
                f"{weights}, seeds {self.seed}..{self.seed + self.prompts - 1}")

    def facts(self) -> dict[str, Any]:
        return {"n": self.n, "seed": self.seed, "d": self.batch.d, "dt": self.dt, "mask": self.problem.mask.name,
                "layer_dt": self.batch.dts, "integrator": self.batch.integrator, "prompts": self.prompts,
                "backend": self.backend.describe(), "chunk": self.chunk,
                "weights": "per prompt" if self.batch.own_weights else "shared",
                "prompts_per_rank": [token_block(self.prompts, r, self.comm.size).stop
                                     - token_block(self.prompts, r, self.comm.size).start
                                     for r in range(self.comm.size)]}

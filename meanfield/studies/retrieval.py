"""The retrieval profile of a causal run: how much the last token remembers each source position.

For a causal run (``model.mask = "causal"``) the retrieval profile of an observable pair
``(psi, phi)`` is (MODEL.md, "Positional decay (ALiBi) and the retrieval profile")

    R(t; s0) = lim_N N Cov( psi(x_N(t)), phi(x_{ceil(N s0)}(0)) ) = Cov_{rho0(s0)}( Phi_0(s0, .), phi ),

``Phi_0`` the influence function of ``<psi, rho(t, last position)>`` with respect to the initial
density of position s0: one adjoint solve per observable psi and time (:mod:`meanfield.adjoint`;
all of them in one backward sweep), whatever the prompt distribution, attention or sphere.
The last position is the last slice, ``s = 1 - 1/(2M)``; the source positions are the other
slices' ``s_k`` (the last slice's own covariance holds the token itself, O(1) and not a profile).

On S^1 by Fourier mode n: ``psi = e^{-in theta}``, ``phi = e^{in theta}``, value the real part,
``Cov(Phi_0[cos n theta], cos n theta) + Cov(Phi_0[sin n theta], sin n theta)`` (two adjoint
columns per mode); DGR's retrieval score for M codewords sums the modes with weights
``e^{-pi^2 n^2 / (2 M^2)}`` while they exceed :data:`SCORE_WEIGHT_CUTOFF`.  On either sphere,
given pairs ``(psi, phi)`` of expressions in x, y, z.

Writes ``retrieval.csv`` (``t, source_position, mode, value, profile``: mode n >= 1 a Fourier
mode or the n-th given pair, mode 0 DGR's score; ``profile`` says which in words: ``mode n``,
``pair n: PSI / PHI``, ``score (M codewords)``), ``retrieval.png`` (the profile against source
position per time, primacy, recency and the interior minimum marked; in DGR's setting,
:func:`dgr_setting`, the closed form of :mod:`meanfield.references.retrieval` dashed beside
each profile), config.toml, metadata.json, study.json.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config, ConfigError
from ..masks import Causal
from ..own_observables import parse_observable
from ..references.retrieval import codeword_weights, retrieval_mode, score_modes
from ..spheres import S1, sphere_named
from .response import open_adjoint_study, recorded_forward, swept_backward

#: The score sums the modes whose codeword weight e^{-pi^2 n^2 / (2 M^2)} is above this (the
#: rest changes it by less than this fraction of the largest R_n).
SCORE_WEIGHT_CUTOFF = 1e-6

#: retrieval.csv's columns.
COLUMNS = ("t", "source_position", "mode", "value", "profile")


@dataclass
class RetrievalResult:
    """What :func:`retrieval` produced: its directory and the rows of retrieval.csv."""

    path: Path
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Profiles:
    """The functions psi and phi the profiles need, and each profile as weighted covariances.

    ``profiles[i] = (mode, [(weight, p, q), ...])``: profile ``mode`` is the sum of
    ``weight * Cov(Phi_0[psis[p]], phis[q])``."""

    psis: Sequence[Callable[[np.ndarray], np.ndarray]]
    phis: Sequence[Callable[[np.ndarray], np.ndarray]]
    profiles: list[tuple[int, list[tuple[float, int, int]]]]
    names: dict[int, str]
    codewords: int | None = None


def _fourier(points: np.ndarray, n: int) -> np.ndarray:
    """cos(n theta) (n > 0) or sin(|n| theta) (n < 0) at points on S^1."""
    theta = np.arctan2(points[:, 1], points[:, 0])
    return np.cos(n * theta) if n > 0 else np.sin(-n * theta)


def profiles_of(problem: Any, modes: Sequence[int], codewords: int | None, observables: Sequence[str],
                sources: Sequence[str]) -> Profiles:
    """The profiles asked for, checked against the problem (``ConfigError`` naming the field)."""
    slices = problem.mask.slices
    if not slices:
        raise ConfigError("--retrieval: needs a causal run (model.mask = 'causal')")
    if slices < 2:
        raise ConfigError("positions.slices: the retrieval profile needs at least 2 slices")
    if len(observables) != len(sources):
        raise ConfigError(f"--source: give one per --observable (got {len(sources)} for {len(observables)})")
    if observables and (modes or codewords is not None):
        raise ConfigError("--observable: give either Fourier modes (--modes, --codewords) or pairs "
                          "(--observable PSI --source PHI), not both")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in modes) or len(set(modes)) < len(modes):
        raise ConfigError(f"--modes: distinct integers >= 1, got {list(modes)}")
    if codewords is not None and (isinstance(codewords, bool) or not isinstance(codewords, int) or codewords < 1):
        raise ConfigError(f"--codewords: an integer >= 1, got {codewords!r}")
    if observables:
        psis = [parse_observable(text) for text in observables]
        phis = [parse_observable(text) for text in sources]
        names = {i + 1: f"pair {i + 1}: {psi} / {phi}" for i, (psi, phi) in enumerate(zip(observables, sources))}
        return Profiles(list(psis), list(phis), [(i + 1, [(1.0, i, i)]) for i in range(len(psis))], names)
    if sphere_named(problem.sphere) is not S1:
        raise ConfigError("--modes: Fourier modes need S^1; on S^2 give pairs --observable PSI --source PHI")
    modes = list(modes) if modes or codewords is not None else [1]
    weights = None
    if codewords is not None:
        count = score_modes(codewords, SCORE_WEIGHT_CUTOFF)
        weights = codeword_weights(codewords, count)
    every = sorted(set(modes) | set(range(1, 0 if weights is None else len(weights) + 1)))
    keys = [n for m in every for n in (m, -m)]  # cos, sin
    functions = [partial(_fourier, n=n) for n in keys]
    profiles = [(m, [(1.0, keys.index(m), keys.index(m)), (1.0, keys.index(-m), keys.index(-m))]) for m in modes]
    if weights is not None:
        profiles.append((0, [(float(w), keys.index(sign * m), keys.index(sign * m))
                             for m, w in enumerate(weights, start=1) for sign in (1, -1)]))
    names = {m: f"mode {m}" for m in modes} | ({0: f"score ({codewords} codewords)"} if codewords is not None else {})
    return Profiles(functions, functions, profiles, names, codewords)


def dgr_setting(problem: Any) -> bool:
    """Whether a causal run is the setting of DGR's closed form (:mod:`meanfield.references.retrieval`):
    iid uniform tokens on S^1, unnormalised attention with Q = K = V = I in one layer, positional
    weights normalised over positions."""
    data = problem.config.data
    return (sphere_named(problem.sphere) is S1 and isinstance(problem.mask, Causal) and problem.mask.normalise
            and data["model"].get("attention") == "unnormalized" and data["initial"].get("kind") == "uniform"
            and len(problem.schedule().layers) == 1 and problem.model().is_identity)


def closed_form(problem: Any, asked: Profiles, last: float) -> Callable[[float, int, np.ndarray], np.ndarray] | None:
    """DGR's closed form of each Fourier profile (mode n: R_n; mode 0: the score, summed over the
    same modes as the study) with the last slice ``last`` as the target, or None outside
    :func:`dgr_setting` or for pairs of expressions."""
    if not dgr_setting(problem) or any(name.startswith("pair") for name in asked.names.values()):
        return None
    beta, decay = problem.model().beta, problem.mask.decay
    weights = codeword_weights(asked.codewords, score_modes(asked.codewords, SCORE_WEIGHT_CUTOFF)) \
        if asked.codewords is not None else np.zeros(0)

    def profile(t: float, mode: int, s0: np.ndarray) -> np.ndarray:
        if mode:
            return retrieval_mode(t, s0, mode, beta, decay, s=last)
        return sum(w * retrieval_mode(t, s0, n, beta, decay, s=last) for n, w in enumerate(weights, start=1))

    return profile


def retrieval(
    config: Config | Any,
    times: Sequence[float],
    *,
    modes: Sequence[int] = (),
    codewords: int | None = None,
    observables: Sequence[str] = (),
    sources: Sequence[str] = (),
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    overwrite: bool = False,
) -> RetrievalResult:
    """The retrieval profile R(t; s0) of a causal run (module docstring).

    Parameters
    ----------
    config
        Config (or mapping / TOML path) of a causal PDE run (no atoms).
    times
        Times t in [0, t_final].
    modes
        Fourier modes n >= 1 (S^1): psi = e^{-in theta}, phi = e^{in theta}.
    codewords
        M >= 1: add DGR's retrieval score (mode 0) for M codewords (S^1).
    observables, sources
        Pairs (psi, phi) of expressions in x, y, z (S^1 or S^2; not with ``modes`` or
        ``codewords``), the i-th pair written as mode ``i + 1``.  Without pairs, modes or
        codewords: mode 1.
    out
        Output directory (default ``runs/<name>-retrieval``).
    comm
        MPI communicator (default COMM_WORLD).
    quiet
        No report on the terminal.
    overwrite
        Redo a retrieval study already in ``out``.

    Returns
    -------
    The directory and the rows of retrieval.csv (on every rank).
    """
    from mpi4py import MPI

    from ..collective import everywhere, on_root
    from ..rundir.study_directory import write_record, write_table

    comm = comm or MPI.COMM_WORLD
    study = open_adjoint_study(config, overrides, comm, times, "retrieval", out, overwrite,
                               lambda config, problem: profiles_of(problem, modes, codewords, observables, sources))
    config, times, path, solver, asked = study.config, study.times, study.path, study.solver, study.inputs
    environment, threads, started = study.environment, study.threads, study.started
    pde = solver.pde
    positions = pde.slice_positions
    assert positions is not None  # a causal run: checked by profiles_of
    recorded_forward(solver, times, comm, quiet)
    M, op = pde.slice_count, solver.operator
    points = op.points  # the adjoint's rows (cells, or DG1's vertices)
    P, Q = len(asked.psis), len(asked.phis)
    finals = {}
    for i, t in enumerate(times):
        final = np.zeros((M, len(points), P * len(times)))
        for p, psi in enumerate(asked.psis):
            final[-1, :, i * P + p] = M * psi(points)  # the last position's <psi, rho(t)>
        finals[t] = final
    phi0, _ = swept_backward(solver, finals, (), comm, quiet)  # (M, rows, P T): Phi_0(s_k) per slice
    rho0 = pde.split(solver.initial)
    sources_at = np.stack([phi(points) for phi in asked.phis], axis=1)  # (rows, Q)
    # int rho0(s_k) Phi_0 phi_q, int rho0(s_k) Phi_0 and int rho0(s_k) phi_q, in the adjoint's pairing
    columns = P * len(times)
    product = op.inner((phi0[..., None] * sources_at[None, :, None, :]).reshape(M, len(points), -1),
                       rho0).reshape(M, columns, Q)
    mean_phi0 = op.inner(phi0, rho0)
    mean_source = op.inner(np.broadcast_to(sources_at[None], (M,) + sources_at.shape), rho0)
    covariance = product - mean_phi0[:, :, None] * mean_source[:, None, :]  # (M, P T, Q)
    rows = []
    for i, t in enumerate(times):
        for mode, terms in asked.profiles:
            profile = sum(w * covariance[:, i * P + p, q] for w, p, q in terms)
            for k in range(M - 1):
                rows.append({"t": t, "source_position": float(positions[k]), "mode": mode,
                             "value": float(profile[k]), "profile": asked.names[mode]})
    seconds = time.perf_counter() - started

    def write() -> None:
        write_table(path / "retrieval.csv", rows, COLUMNS)
        write_record(path, "retrieval", config.to_toml(), {
            "times": times, "modes": [mode for mode, _ in asked.profiles], "codewords": codewords,
            "pairs": [{"psi": o, "phi": s} for o, s in zip(observables, sources)],
            "last_position": float(positions[-1]), "threads": threads,
            "steps": len(solver.trajectory.steps), "adjoint_memory": solver.trajectory.memory(),
            "timings": {"total": seconds}, **environment})
        from ..plotting.retrieval import retrieval_figure

        fig = retrieval_figure(rows, title=f"retrieval profile of {config.data['name']} (last position "
                                           f"s = {positions[-1]:.4g})",
                               closed_form=closed_form(pde.problem, asked, float(positions[-1])))
        fig.savefig(path / "retrieval.png", dpi=120)
        if not quiet:
            print(format_profile(rows), flush=True)

    on_root(comm, write)
    return RetrievalResult(path, everywhere(comm, lambda: rows))


def format_profile(rows: Sequence[dict[str, Any]]) -> str:
    """Per time and mode: primacy (first source), the interior minimum (where there is one) and
    recency (last source), for the terminal."""
    from ..plotting.retrieval import interior_minimum, split_profiles

    names = {int(r["mode"]): str(r["profile"]) for r in rows}
    width = max([7, *map(len, names.values())])
    lines = [f"{'t':>8s}  {'profile':<{width}s}  {'primacy':>12s}  {'minimum':>12s}  {'at s0':>8s}  {'recency':>12s}"]
    for (t, mode), (s, v) in split_profiles(rows).items():
        i = interior_minimum(v)
        low = f"{v[i]:12.5g}  {s[i]:8.4f}" if i is not None else f"{'-':>12s}  {'-':>8s}"
        lines.append(f"{t:8.4g}  {names[mode]:<{width}s}  {v[0]:12.5g}  {low}  {v[-1]:12.5g}")
    return "\n".join(lines)


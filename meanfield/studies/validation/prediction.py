"""The predicted size of the particles' errors: the first correction to the mean-field limit.

For iid initial tokens, ``n Var <phi, mu_n(t)> -> Var_rho0(Phi_0)`` (``n_var``), ``Phi_0`` the
influence function of ``<phi, rho(t)>`` (:mod:`meanfield.response`, one adjoint solve per
observable), and the bias is O(1/n).  So the RMS over seeds of an error that is the norm of
differences of such observables is predicted, with no fit, as ``sqrt(sum n_var / n)``:

``mean_error``
    ``|m_1(mu_n) - m_1(rho)|``: the observables ``x, y[, z]``;
``second_moment_error``
    the Frobenius norm of the second-moment difference: ``x_k x_l`` (off-diagonal entries twice).

The seeds' scatter of the measured RMS is large when one observable dominates: with S seeds
and the observables' ``n_var`` v_k (independent Gaussian errors), the RMS's relative standard
deviation is about ``sqrt(sum v_k^2 / (2 S)) / sum v_k``, 15 % for the first moment of a
bump on S^1 with 16 seeds.  The seeds ``particles.seed + k`` are the same at every n (and the
first tokens of a larger n are those of a smaller one), so the ratios at different n scatter
together.

A causal run's ``n_var`` is that of tokens at fixed positions (the mean over positions of each
position's variance), as ``meanfield validate`` draws them.  The ratio measured / predicted is
about 1 (within the seeds' scatter, about ``1/sqrt(2 seeds)``) when the particles agree with
the mean-field limit at that n; a ratio that grows with n is a bias (discretisation, time step,
a bug).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...config import Config

#: Names of the coordinates in observable expressions.
COORDINATES = ("x", "y", "z")


def observables(d: int) -> dict[str, list[tuple[str, float]]]:
    """Metric -> the observables (``NAME=EXPR``) whose ``n_var`` it sums, each with its multiplicity."""
    names = COORDINATES[:d]
    second = [(f"m2_{k}{l}={names[k]}*{names[l]}", 1.0 if k == l else 2.0) for k in range(d) for l in range(k, d)]
    return {"mean_error": [(f"mean_{k}={names[k]}", 1.0) for k in range(d)], "second_moment_error": second}


def predicted_variances(config: Config, d: int, t: float, out: Path, comm, overwrite: bool,
                        quiet: bool = True) -> dict[str, float]:
    """Metric -> ``sum n_var`` at time t (the limit of n times the mean square error), from
    ``meanfield response`` written under ``out`` (collective); its progress shown unless ``quiet``
    (its table never)."""
    from ..response import response

    wanted = observables(d)
    texts = [text for terms in wanted.values() for text, _ in terms]
    rows = response(config, texts, [t], out=out, comm=comm, quiet=True, overwrite=overwrite,
                    progress=not quiet).rows
    n_var = {row["observable"]: row["n_var"] for row in rows}
    return {metric: float(sum(m * n_var[text.split("=")[0]] for text, m in terms)) for metric, terms in wanted.items()}


def add_predictions(summary: list[dict], variances: dict[str, float]) -> list[dict]:
    """The summary rows with ``predicted_n<N> = sqrt(n_var / N)`` and ``ratio_n<N>`` (measured RMS /
    predicted) beside each ``rms_n<N>`` (nan for metrics without a prediction)."""
    out = []
    for row in summary:
        ns = [int(k[len("rms_n"):]) for k in row if k.startswith("rms_n")]
        total = variances.get(row["metric"], np.nan)
        extra = {}
        for n in ns:
            predicted = float(np.sqrt(total / n)) if np.isfinite(total) and total >= 0 else np.nan
            extra[f"predicted_n{n}"] = predicted
            extra[f"ratio_n{n}"] = row[f"rms_n{n}"] / predicted if predicted > 0 else np.nan
        out.append({**row, **extra})
    return out

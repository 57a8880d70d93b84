"""The predicted size of the particles' errors, the scatter of that prediction over seeds, and the verdict.

For iid initial tokens, ``n Var <phi, mu_n(t)> -> Var_rho0(Phi_0)`` (``n_var``), ``Phi_0`` the
influence function of ``<phi, rho(t)>`` (:mod:`meanfield.response`, one adjoint solve per
observable), and the bias is O(1/n).  An error that is a norm of differences of such
observables, ``e^2 = sum_k m_k delta_k^2`` (``m_k`` the multiplicities), is predicted with no fit:

``mean_error``
    ``|m_1(mu_n) - m_1(rho)|``: the observables ``x, y[, z]``;
``second_moment_error``
    the Frobenius norm of the second-moment difference: ``x_k x_l`` (off-diagonal entries twice).

With ``C`` the limit of ``n Cov(delta)`` (``C_jk = Cov_rho0(Phi_j, Phi_k)``, from the same adjoint
solves as ``n_var``, its diagonal) and ``D = diag(m_k)``, the mean square error is ``tr(DC) / n``,
so the predicted RMS is ``sqrt(tr(DC) / n)``.  The errors are Gaussian in the limit, so ``n e^2`` is a weighted sum of
chi-squares, and the mean over S seeds of ``e^2`` divided by its expectation has variance
``2 tr((DC)^2) / (S tr(DC)^2)``: close to a chi-square of ``k = S tr(DC)^2 / tr((DC)^2)``
degrees of freedom over k (Satterthwaite; exact when one direction carries all the variance,
then ``k = S``).  The ratio measured RMS / predicted is then ``sqrt(chi^2_k / k)``: its standard
deviation (:func:`ratio_scatter`) is about ``sqrt(1 / (2 k))`` for large k, ``sqrt(1/(2S))`` when
one observable dominates (0.39 at S = 3, 0.11 at S = 40), and its 99 % band is
:func:`ratio_band`.  The correlations matter: on S^1 ``x^2 + y^2 = 1``, so the ``xx`` and ``yy``
errors are opposite and the second moment has about half the degrees of freedom its variances
alone suggest.  The seeds ``particles.seed + k`` are the same at every n (and the first tokens
of a larger n are those of a smaller one), so the ratios at different n scatter together.

A causal run's ``n_var`` is that of tokens at fixed positions (the mean over positions of each
position's variance, and the same for the covariances), as ``meanfield validate`` draws them.

The verdict (:func:`verdict`): every ratio inside its band is consistent with the mean-field
limit; a ratio above the band at the largest n is a bias that does not shrink like ``n^{-1/2}``
(the PDE's discretisation: compare the ``pde_floor`` column; the particles' time step; a bug);
above it only at smaller n, an O(1/n) bias that fades; below the band, tokens that are not iid (a
deterministic sampler).  The other metrics have no prediction, and :data:`NO_PREDICTION` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...config import Config

#: Names of the coordinates in observable expressions.
COORDINATES = ("x", "y", "z")
#: Probability that the ratio of a study that agrees with the mean-field limit falls outside its band.
BAND_OUTSIDE = 0.01
#: Why the metrics other than the moment errors have no predicted RMS (the report's and summary.csv's ``note``).
NO_PREDICTION = {
    "energy_error": "the energy is quadratic in the measure; its influence function is not computed",
    "mmd": "a distance between measures, not a norm of finitely many observables",
    "w1": "a distance between measures, not a norm of finitely many observables",
    "sliced_w2": "a distance between measures, not a norm of finitely many observables",
    "hist_l1": "a distance between histograms; hist_l1_noise in validation.csv is its iid sampling-noise level "
               "(drawn on errors.png)",
    "mean_error_by_position": "binned by position slice; the influence functions are those of the whole measure",
}
#: Reason of a metric not in :data:`NO_PREDICTION` (one the study has no variances for, e.g. hybrid runs).
NO_VARIANCES = "no influence functions for this run (atoms)"
#: Levels of a metric's verdict, as the terminal and summary.csv say them.
CONSISTENT = "consistent with the mean-field limit"
BIAS = "a bias that does not shrink like n^-1/2"


@dataclass(frozen=True)
class Prediction:
    """The predicted mean square error of one metric: ``trace / n``, with ``trace = tr(DC)`` and
    ``trace_squares = tr((DC)^2)`` (module docstring)."""

    trace: float
    trace_squares: float

    def degrees_of_freedom(self, seeds: int) -> float:
        """The chi-square degrees of freedom of the mean square error over ``seeds`` seeds."""
        return seeds * self.trace**2 / self.trace_squares if self.trace_squares > 0 else np.inf


def ratio_scatter(dof: float) -> float:
    """Standard deviation of ``sqrt(chi^2_k / k)`` for ``k = dof`` degrees of freedom:
    ``sqrt(1 - (2/k) (Gamma((k+1)/2) / Gamma(k/2))^2)``, about ``sqrt(1/(2k))`` for large k."""
    from scipy.special import gammaln

    if not np.isfinite(dof):
        return 0.0
    mean = np.exp(gammaln((dof + 1) / 2) - gammaln(dof / 2)) * np.sqrt(2.0 / dof)
    return float(np.sqrt(max(1.0 - mean**2, 0.0)))


def ratio_band(dof: float) -> tuple[float, float]:
    """The central ``1 - BAND_OUTSIDE`` interval of ``sqrt(chi^2_k / k)``, k = ``dof``: the
    chi-square quantiles ``2 P^-1(k/2, q)`` with P the regularised lower incomplete gamma function
    (scipy.special; scipy.stats's ``chi2.ppf`` is the same, after 1.5 s of imports)."""
    from scipy.special import gammaincinv

    if not np.isfinite(dof):
        return 1.0, 1.0
    low, high = 2.0 * gammaincinv(dof / 2, [BAND_OUTSIDE / 2, 1 - BAND_OUTSIDE / 2])
    return float(np.sqrt(low / dof)), float(np.sqrt(high / dof))


def observables(d: int) -> dict[str, list[tuple[str, float]]]:
    """Metric -> the observables (``NAME=EXPR``) whose ``n_var`` it sums, each with its multiplicity."""
    names = COORDINATES[:d]
    second = [(f"m2_{k}{l}={names[k]}*{names[l]}", 1.0 if k == l else 2.0) for k in range(d) for l in range(k, d)]
    return {"mean_error": [(f"mean_{k}={names[k]}", 1.0) for k in range(d)], "second_moment_error": second}


def predicted_variances(config: Config, d: int, t: float, out: Path, comm, overwrite: bool,
                        quiet: bool = True) -> dict[str, Prediction]:
    """Metric -> its :class:`Prediction` at time t, from ``meanfield response`` of the metric's
    observables (their covariances), written under ``out`` (collective); its progress shown unless
    ``quiet`` (its table never)."""
    from ..response import response

    wanted = observables(d)
    texts = [text for terms in wanted.values() for text, _ in terms]
    covariance = response(config, texts, [t], out=out, comm=comm, quiet=True, overwrite=overwrite,
                          progress=not quiet).covariance[0, 0]
    predictions, start = {}, 0
    for metric, terms in wanted.items():
        block = slice(start, start + len(terms))
        weighted = np.array([m for _, m in terms])[:, None] * covariance[block, block]
        predictions[metric] = Prediction(float(np.trace(weighted)), float(np.trace(weighted @ weighted)))
        start += len(terms)
    return predictions


def verdict(ratios: list[float], bands: list[tuple[float, float]], floor: float, predicted_last: float) -> str:
    """A metric's verdict from its ratios at increasing n and their bands (module docstring)."""
    above = [r > high for r, (_, high) in zip(ratios, bands)]
    below = [r < low for r, (low, _) in zip(ratios, bands)]
    if above[-1] and len(ratios) > 1 and ratios[-1] <= ratios[0]:
        return ("above the sampling noise by a factor that does not grow with n (the errors still shrink like "
                "n^-1/2: a larger variance than predicted, not a bias)")
    if above[-1]:
        text = f"{BIAS} (ratio above the seeds' band at the largest n"
        if np.isfinite(floor) and floor > 0:
            text += f"; pde_floor {floor:.2g} against the predicted RMS {predicted_last:.2g} there"
        return text + ")"
    if any(above):
        return f"{CONSISTENT} at the largest n (above the seeds' band at smaller n: an O(1/n) bias that fades)"
    if any(below):
        return "below the sampling noise of iid tokens (a deterministic sampler?)"
    return f"{CONSISTENT} (every ratio inside the seeds' band)"


def add_predictions(summary: list[dict], predictions: dict[str, Prediction], seeds: int) -> list[dict]:
    """The summary rows with, beside each ``rms_n<N>``, ``predicted_n<N> = sqrt(tr(DC) / N)``,
    ``ratio_n<N>`` (measured RMS / predicted), ``ratio_scatter_n<N>`` (the ratio's standard
    deviation over ``seeds`` seeds) and ``ratio_low_n<N>``, ``ratio_high_n<N>`` (its band), then
    the metric's ``verdict`` and ``note`` (why it has no prediction; nan columns then)."""
    out = []
    for row in summary:
        ns = [int(k[len("rms_n"):]) for k in row if k.startswith("rms_n")]
        prediction = predictions.get(row["metric"])
        extra: dict = {}
        if prediction is None or not prediction.trace > 0:
            for n in ns:
                extra.update({f"{name}_n{n}": np.nan for name in ("predicted", "ratio", "ratio_scatter", "ratio_low",
                                                                  "ratio_high")})
            note = NO_PREDICTION.get(row["metric"], NO_VARIANCES)
            out.append({**row, **extra, "verdict": "no prediction", "note": note})
            continue
        dof = prediction.degrees_of_freedom(seeds)
        scatter, band = ratio_scatter(dof), ratio_band(dof)
        for n in ns:
            predicted = float(np.sqrt(prediction.trace / n))
            extra.update({f"predicted_n{n}": predicted, f"ratio_n{n}": row[f"rms_n{n}"] / predicted,
                          f"ratio_scatter_n{n}": scatter, f"ratio_low_n{n}": band[0], f"ratio_high_n{n}": band[1]})
        said = verdict([extra[f"ratio_n{n}"] for n in ns], [band] * len(ns), row["pde_floor"],
                       extra[f"predicted_n{ns[-1]}"])
        out.append({**row, **extra, "verdict": said, "note": ""})
    return out

"""
The mean-field limit: particles against the PDE
===============================================

The PDE describes the limit of infinitely many tokens.  This demo measures how fast systems of
n tokens approach it: it runs the PDE and, for each n, a few particle systems with the same
model, and reports the distance between the two against n (what ``meanfield validate`` does;
:doc:`/validation`).  For smooth observables the error falls like the Monte-Carlo rate
``n^(-1/2)``, until it meets the PDE's own discretisation error.

It runs in about ten seconds on one core: 128 cells, n = 100 to 1600 tokens, eight seeds each.
"""

# %%
# The case
# --------
#
# A smooth two-bump density on the circle under softmax attention with ``beta = 1``, compared
# at two times.  ``[particles] seed`` is the first seed; the study uses ``seed``, ``seed + 1``,
# ...  The study reads the comparison times from ``[time] outputs``.

import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import meanfield
from meanfield.studies.validation import validate

config = meanfield.load_config({
    "name": "s1-validation-demo",
    "mesh": {"sphere": "S1", "resolution": 128},
    "model": {"attention": "softmax", "beta": 1.0},
    "initial": {"kind": "vmf", "centers": [[1.0, 0.0], [-0.5, 0.8]], "kappas": [2.0, 2.0],
                "weights": [0.6, 0.4]},
    "time": {"t_final": 1.0, "outputs": 2},
    "particles": {"seed": 0, "dt": 0.05},
    "output": {"xdmf": False},
})

# %%
# The study
# ---------
#
# :func:`~meanfield.studies.validation.validate` runs the PDE (also on twice the cells, for
# the discretisation floor and extrapolated reference moments), the predicted fluctuations of
# the moments from the adjoint (:func:`meanfield.response`), and one particle run per n and
# seed; every run is an ordinary run directory inside the study's folder ``out``.

tmp = Path(tempfile.mkdtemp(prefix="meanfield-demo-"))
ns = [100, 400, 1600]
study = validate(config, ns=ns, seeds=8, out=tmp / "validation", quiet=True)
print("files:", sorted(p.name for p in study.path.iterdir()))

# %%
# Errors against n
# ----------------
#
# ``study.rows`` holds every measurement (metric, time, n, seed, value), as ``validation.csv``
# does; ``study.summary`` one row per metric at the last time: the fitted slope of log error
# against log n, the PDE's floor (the metric between the PDE on h and h/2) and the RMS error
# per n.

t_final = max(row["time"] for row in study.rows)
print(f"{'metric':>20s}  {'slope':>6s}  {'pde floor':>9s}  " + "  ".join(f"rms n={n:<5d}" for n in ns))
for row in study.summary:
    print(f"{row['metric']:>20s}  {row['slope_rms']:6.2f}  {row['pde_floor']:9.2g}  "
          + "  ".join(f"{row[f'rms_n{n}']:11.3g}" for n in ns))
    assert -0.8 < row["slope_rms"] < -0.3, row  # the rate the text below reads off

metrics = ("mean_error", "second_moment_error", "energy_error", "mmd", "w1")
fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
for metric in metrics:
    values = np.array([[r["n"], r["value"]] for r in study.rows if r["metric"] == metric and r["time"] == t_final])
    rms = [np.sqrt(np.mean(values[values[:, 0] == n, 1] ** 2)) for n in ns]
    line, = ax.loglog(ns, rms, "o-", label=metric)
    ax.loglog(values[:, 0], values[:, 1], ".", color=line.get_color(), alpha=0.4)
reference = np.array(ns, float)
ax.loglog(reference, 0.5 * (reference / ns[0]) ** -0.5, "k--", label="n^(-1/2)")
ax.set(xlabel="tokens n", ylabel=f"error at t = {t_final:g}", title="particles against the PDE")
ax.legend(fontsize="small")
plt.show()

# %%
# The slopes are near -1/2, the Monte-Carlo rate: the particle systems approach the PDE as the
# mean-field limit says (``hist_l1_noise`` is the histogram distance that sampling noise alone
# gives, for scale).  Over eight seeds and n up to 1600 the fitted slopes still scatter by a
# few tenths (``slope_std`` in the summary); larger n and more seeds
# (``runs/examples/s1-validation.toml``) narrow them, until the errors meet the PDE floor.
#
# The adjoint predicts the size of the moments' fluctuations, not just their rate: the
# summary's ``predicted_n<n>`` is ``sqrt(n_var / n)`` and ``ratio_n<n>`` the measured RMS
# over it, about 1 within the seeds' scatter.

for row in study.summary:
    if np.isfinite(row[f"predicted_n{ns[-1]}"]):
        print(f"{row['metric']:>20s}: " + "  ".join(f"n={n}: {row[f'ratio_n{n}']:.2f}" for n in ns))

# %%
# At cluster level, ``study.clusters`` compares the tokens with the PDE in the regions of the
# PDE's clusters (mass, position, count):

for row in study.clusters:
    print(f"{row['metric']:>22s}  n = {row['n']:<5d}  mean {row['mean']:.3g}  worst {row['worst']:.3g}")

shutil.rmtree(tmp)

"""
A PDE run from the Python API
=============================

This demo runs the mean-field PDE on the circle from Python, extends the run, reads it back
and plots the density: what ``meanfield run``, ``meanfield resume`` and ``meanfield plot`` do
from the command line, which only calls these functions.  It also checks the run against
something independent, the growth rates of the linear instability of the uniform density
(:doc:`/model`).

It runs in a few seconds on one core: 256 cells, to t = 7.5.
"""

# %%
# The configuration
# -----------------
#
# A run is described by a configuration: a TOML file, or the same tables as a Python mapping.
# Every key has a default and unknown keys are errors (:doc:`/configuration`).  Here: tokens on
# the circle S^1 under softmax attention with ``beta = 9``, starting from a uniform density
# with a small perturbation in the Fourier modes 3, 4 and 7, solved with DG1 (second order)
# on 256 cells.  ``load_config`` merges the mapping with the defaults and checks it; a bad
# value raises :class:`meanfield.config.ConfigError` naming the field.

import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from scipy.special import ive

import meanfield

PERTURBATION = "0.05*cos(3*arctan2(y, x)) + 0.05*sin(4*arctan2(y, x) + 1) + 0.02*cos(7*arctan2(y, x))"
BETA = 9.0

config = meanfield.load_config({
    "name": "s1-demo",
    "mesh": {"sphere": "S1", "resolution": 256},
    "model": {"attention": "softmax", "beta": BETA},
    "initial": {"kind": "expression", "expression": f"1 + {PERTURBATION}"},
    "scheme": {"kind": "dg1"},
    "time": {"t_final": 5.0, "outputs": 20},
    "output": {"xdmf": False},  # no ParaView files: this demo reads the run back in Python
})
print(config.to_toml())

# %%
# Running
# -------
#
# :func:`meanfield.run` writes a run directory (``out``; here a temporary directory, so that
# the demo leaves nothing behind) and returns the run read back from it.  Under
# ``mpirun -n P`` the same call runs in parallel, every rank passing the same ``out``.
# ``quiet=True`` keeps the progress log off the terminal; it is still written to ``run.log``.

tmp = Path(tempfile.mkdtemp(prefix="meanfield-demo-"))
result = meanfield.run(config, out=tmp / "s1-demo", quiet=True)
print("status:", result.metadata["status"], " t reached:", result.times[-1])
print("files:", sorted(p.name for p in result.path.iterdir()))

# %%
# A completed run can be extended: :func:`meanfield.resume` continues it in place from its
# last checkpoint, on any number of ranks, here to t = 7.5 (31 outputs in all, at the same
# spacing of 0.25).

result = meanfield.resume(result.path, t_final=7.5, quiet=True)
print("t reached:", result.times[-1], " outputs:", len(result.times))

# %%
# Reading a run back
# ------------------
#
# :func:`meanfield.load_run` reads any run directory, at any time later and on any number of
# ranks: the output times, the density's cell averages (one row per output), the mesh and
# the observables of ``observables.csv`` (:doc:`/outputs`).

result = meanfield.load_run(tmp / "s1-demo")
print("densities:", result.densities.shape, " observables:", ", ".join(result.observables))
mass = result.observables["mass"]
print(f"mass conserved to {np.max(np.abs(mass - 1)):.1e}")

# %%
# The same run as an :mod:`xarray` Dataset, the one ``run.nc`` holds:

ds = result.to_xarray()
print(ds["rho_max"].to_series().iloc[::5])

# %%
# The density over the circle and time
# ------------------------------------
#
# Four bumps of the initial perturbation sharpen into clusters.  On S^1 the cell centroids
# give the angle theta of each cell.

theta = np.arctan2(result.centroids[:, 1], result.centroids[:, 0])
order = np.argsort(theta)
uniform = 1 / (2 * np.pi)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
image = left.pcolormesh(theta[order], result.times, result.densities[:, order] / uniform,
                        shading="nearest", cmap="viridis", norm="log")
fig.colorbar(image, ax=left, label="rho / uniform")
left.set(xlabel="theta", ylabel="t", title="density")
for k in (0, 12, 20, 26, 30):
    right.plot(theta[order], result.densities[k, order] / uniform, label=f"t = {result.times[k]:g}")
right.set(xlabel="theta", ylabel="rho / uniform", yscale="log", title="profiles")
right.legend()
plt.show()

# %%
# A check: the linear growth rates
# --------------------------------
#
# While the perturbation is small, each Fourier mode k of the density grows like
# ``exp(gamma_k t)`` with, for softmax attention on S^1 (:doc:`/model`),
#
# .. math:: \gamma_k = \frac{k^2 I_k(\beta)}{\beta I_0(\beta)},
#
# ``I_k`` the modified Bessel functions.  The fastest mode, near ``k ~ sqrt(2 beta)``, sets how
# many clusters form first: here k = 4, four clusters.  The amplitudes of the computed modes
# over the first outputs (t <= 2), fitted to exponentials, give the rates the PDE run sees.

areas = result.areas


def amplitude(k: int, density: np.ndarray) -> float:
    """|<rho, e^{-ik theta}>|: the amplitude of Fourier mode k of a density's cell averages."""
    return float(np.abs(np.sum(density * areas * np.exp(-1j * k * theta))))


early = result.times <= 2.0
print(" k   gamma_k (theory)   gamma_k (PDE run)")
for k in (3, 4, 7):
    theory = k**2 * ive(k, BETA) / (BETA * ive(0, BETA))
    logs = np.log([amplitude(k, rho) for rho in result.densities[early]])
    measured = np.polyfit(result.times[early], logs, 1)[0]
    print(f"{k:2d}   {theory:14.4f}   {measured:15.4f}")
    if k != 7:
        assert abs(measured - theory) < 0.02 * theory, (k, measured, theory)

# %%
# Modes 3 and 4 grow at their linear rates to about 1.5 %: the size of the nonlinear terms at
# this amplitude (a perturbation ten times smaller agrees to 0.1 %, on 256 cells as on 512).
# Mode 7 grows faster than its own rate: the product of modes 3 and 4 feeds it (3 + 4 = 7), a
# nonlinear effect as large as the mode itself.

# %%
# The run directory is an ordinary folder; the demo removes its own.

shutil.rmtree(tmp)

"""Growth of small perturbations of the uniform density with default time keys and one output,
through the CLI, against the exact linear laws of MODEL.md: the adaptive step must resolve the
growth however far apart the outputs are (the error control of :mod:`meanfield.timestepping`).

* non-causal: a Y_l perturbation grows at gamma_l (S^1: k^2 I_k(beta) / beta, divided by
  I_0(beta) under SA; S^2: l (l + 1) i_l(beta) / beta, divided by i_0(beta) under SA);
* causal, M slices: slice k's amplitude follows ``expm(gamma T B) a(0)``, B the midpoint prefix
  sums (rows divided by s_k under SA), the exact law of the sliced model; USA with ``a(0, s)``
  independent of s also against the continuum law a0 I_0(2 sqrt(gamma s T)) (in amplitude: the
  midpoint rule's error in s, 5e-4 at the first of M = 32 slices, is no error of the step).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cli import cli
from mpi4py import MPI
from scipy import linalg, special

import meanfield
from meanfield.cli import main
from meanfield.sequence import slice_positions

EPS = 1e-5
#: Relative error allowed in a growth rate: the time step's error and the mesh's together.
RATE_TOL = 1e-3
#: Modes as (expression text, function of the coordinates): cos(k theta) on S^1, Y_2^0 (up to a
#: factor) on S^2.
S1_MODE = {2: ("(x**2 - y**2)", lambda x, y, z: x**2 - y**2),
           3: ("(x**3 - 3*x*y**2)", lambda x, y, z: x**3 - 3 * x * y**2)}
S2_MODE = {2: ("(3*z**2 - 1)", lambda x, y, z: 3 * z**2 - 1)}


def exact_rate(sphere: str, attention: str, beta: float, k: int) -> float:
    """gamma_k of MODEL.md about the uniform density (Q = K = V = I)."""
    if sphere == "S1":
        rate = k * k * special.iv(k, beta) / beta
        return float(rate / special.iv(0, beta) if attention == "softmax" else rate)
    rate = k * (k + 1) * special.spherical_in(k, beta) / beta
    return float(rate / special.spherical_in(0, beta) if attention == "softmax" else rate)


def run(tmp_path, text: str) -> meanfield.PDERunResult:
    """``meanfield run`` of ``text`` (the CLI's ``main`` in this process: the subject is the run's
    steps, not the process), loaded back."""
    (tmp_path / "case.toml").write_text(text)
    assert main(["run", str(tmp_path / "case.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    return meanfield.load_run(tmp_path / "out")


def case(sphere: str, resolution: int, attention: str, beta: float, expression: str, t_final: float,
         extra: str = "") -> str:
    """A config with default time keys but ``t_final`` and one output."""
    return (f'name = "linear"\n[mesh]\nsphere = "{sphere}"\nresolution = {resolution}\n'
            f'[model]\nattention = "{attention}"\nbeta = {beta}\n{extra}'
            f'[initial]\nkind = "expression"\nexpression = "{expression}"\n[scheme]\nkind = "dg1"\n'
            f'[time]\nt_final = {t_final}\noutputs = 1\n[output]\nxdmf = false\n')


def amplitudes(result: meanfield.PDERunResult, mode) -> np.ndarray:
    """Projections of the deviation from the uniform density onto the mode (cell averages and
    centroids): (T,) or, causal, (T, M)."""
    x, y, *rest = np.asarray(result.centroids).T
    Y = mode(x, y, rest[0] if rest else 0.0)
    areas = np.asarray(result.areas)
    rho = np.asarray(result.densities)
    uniform = (rho @ areas / areas.sum())[..., None]
    return (rho - uniform) @ (Y * areas)


@pytest.mark.parametrize("sphere, resolution, attention, beta, k, t_final", [
    ("S1", 128, "unnormalized", 1.0, 2, 4.0),
    ("S1", 128, "softmax", 4.0, 3, 3.0),
    pytest.param("S2", 3, "unnormalized", 1.0, 2, 4.0, marks=pytest.mark.slow),
    pytest.param("S2", 3, "softmax", 3.0, 2, 4.0, marks=pytest.mark.slow),
])
def test_growth_rate_with_default_steps_and_one_output(tmp_path, sphere, resolution, attention, beta, k, t_final):
    text, mode = (S1_MODE if sphere == "S1" else S2_MODE)[k]
    result = run(tmp_path, case(sphere, resolution, attention, beta, f"1 + {EPS}*{text}", t_final))
    assert len(result.times) == 2
    a = amplitudes(result, mode)
    rate = np.log(a[-1] / a[0]) / t_final
    exact = exact_rate(sphere, attention, beta, k)
    assert abs(rate / exact - 1) < RATE_TOL, (rate, exact)
    # the error, not the CFL bound, sets the steps, and the log says so
    steps = result.metadata["steps"]
    assert steps["limits"]["error"] > steps["steps"] / 2 and steps["limit"] == "landing"
    assert " by error  wall " in (tmp_path / "out" / "run.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("attention, m", [("unnormalized", 0), ("softmax", 1)])
def test_causal_slices_follow_their_linear_laws_with_default_steps(tmp_path, attention, m):
    beta, k, M, T = 2.0, 2, 32, 1.5
    text, mode = S1_MODE[k]
    mask = f'mask = "causal"\n[positions]\nslices = {M}\n'
    result = run(tmp_path, case("S1", 128, attention, beta, f"1 + {EPS}*s**{m}*{text}", T, mask))
    a = amplitudes(result, mode)
    rate = exact_rate("S1", attention, beta, k)
    s = slice_positions(M)
    B = (np.tril(np.ones((M, M)), -1) + 0.5 * np.eye(M)) / M
    if attention == "softmax":
        B /= s[:, None]
    law = linalg.expm(rate * T * B) @ a[0]
    assert np.max(np.abs(np.log(a[-1] / law) / np.log(law / a[0]))) < RATE_TOL  # every slice's effective rate
    if attention == "unnormalized":  # the continuum law, up to the midpoint rule's error in s
        assert np.max(np.abs(a[-1] / (a[0] * special.iv(0, 2.0 * np.sqrt(rate * s * T))) - 1)) < RATE_TOL


@pytest.mark.slow
def test_error_controlled_steps_agree_on_one_and_two_ranks(tmp_path):
    """The error measure is a global maximum: `mpirun -n 2` takes the steps one rank takes, to
    the same densities."""
    text, _ = S1_MODE[2]
    (tmp_path / "case.toml").write_text(case("S1", 128, "unnormalized", 1.0, f"1 + {EPS}*{text}", 4.0))
    one = meanfield.run(tmp_path / "case.toml", out=tmp_path / "r1", comm=MPI.COMM_SELF, quiet=True)  # the reference
    done = cli(["run", "case.toml", "--out", "r2", "--quiet"], tmp_path, ranks=2)
    assert done.returncode == 0, done.stderr
    two = meanfield.load_run(tmp_path / "r2")
    assert two.metadata["ranks"] == 2
    limits = one.metadata["steps"]["limits"]
    assert limits == two.metadata["steps"]["limits"] and limits["error"] > 10
    assert np.abs(one.densities - two.densities).max() <= 1e-12 * np.abs(one.densities).max()

"""Observed orders of the adjoint (meanfield.adjoint) under refinement, against exact answers.

    python benchmarks/study_adjoint_orders.py modes --sphere S1 --resolutions 128,256,512,1024
    python benchmarks/study_adjoint_orders.py modes --sphere S2 --resolutions 2,3,4,5
    python benchmarks/study_adjoint_orders.py retrieval --sphere S1 --resolutions 32,64,128,256
    python benchmarks/study_adjoint_orders.py retrieval --sphere S2 --resolutions 1,2,3 --dt 0.05
    python benchmarks/study_adjoint_orders.py retrieval --sphere S2 --resolutions 3,4 --dt 0.05 --method fast

``modes``: the influence functions of the exact modes about the uniform density (USA,
Q = K = V = I: ``Phi_0 = e^{gamma t} phi``, :func:`meanfield.references.exact.growth_rate`; S^1
``cos k theta``, k = 1, 2, 3, beta = 2; S^2 ``z`` and ``3 z^2 - 1``, beta = 1.5), the largest error
at the adjoint's rows relative to ``e^{gamma t} max |phi|``.  ``retrieval``: the retrieval profile in DGR's
setting (USA, beta = 1, ALiBi 1 normalised, uniform prompt, 8 slices; S^1 modes 1, 2 and the
8-codeword score, S^2 the pair psi = phi = z) against the 8-slice Volterra law solved exactly
(``M expm(a_n t W)[-1]``, W the slices' kernel: the spatial error alone), the largest relative
error over the source slices.  ``t = 1``, ``dt = 0.01``, DG1 (``--scheme fv`` for FV), the direct
field for ``retrieval`` (``--method fast``: the fast one, at ``[nonlocal] tol = 1e-10``), serial.
Prints errors, orders and the forward and backward times.  Not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np


def mode_errors(sphere: str, resolution: int, scheme: str, t: float, dt: float) -> tuple[list[float], float, float]:
    from mpi4py import MPI

    from meanfield.adjoint import AdjointSolver
    from meanfield.config import load_config
    from meanfield.discrete_pde import DiscretePDE
    from meanfield.problem import Problem
    from meanfield.references.exact import growth_rate

    d, beta = (2, 2.0) if sphere == "S1" else (3, 1.5)
    if d == 2:
        modes = [(lambda p, k=k: np.cos(k * np.arctan2(p[:, 1], p[:, 0])), growth_rate(2, k, beta, False))
                 for k in (1, 2, 3)]
    else:
        modes = [(lambda p: p[:, 2], growth_rate(3, 1, beta, False)),
                 (lambda p: 3 * p[:, 2] ** 2 - 1, growth_rate(3, 2, beta, False))]
    data = {"name": "modes", "mesh": {"sphere": sphere, "resolution": resolution}, "scheme": {"kind": scheme},
            "model": {"attention": "unnormalized", "beta": beta}, "initial": {"kind": "uniform"},
            "time": {"t_final": t, "dt": dt}}
    solver = AdjointSolver(DiscretePDE(Problem(load_config(data)), MPI.COMM_SELF))
    tic = time.process_time()
    solver.forward([t])
    forward = time.process_time() - tic
    points = solver.operator.points
    tic = time.process_time()
    phi0, _ = solver.backward({t: np.stack([f(points) for f, _ in modes], axis=1)[None]})
    backward = time.process_time() - tic
    return ([float(np.abs(phi0[0, :, i] - np.exp(g * t) * f(points)).max() / (np.exp(g * t) * np.abs(f(points)).max()))
             for i, (f, g) in enumerate(modes)], forward, backward)


def retrieval_errors(sphere: str, resolution: int, scheme: str, t: float, dt: float,
                     method: str = "direct") -> tuple[list[float], float, float]:
    from mpi4py import MPI
    from scipy import linalg
    from scipy.special import iv, spherical_in

    from meanfield.config import load_config
    from meanfield.masks.causal_slices import CausalVelocity
    from meanfield.references.retrieval import codeword_weights, score_modes
    from meanfield.studies.retrieval import SCORE_WEIGHT_CUTOFF, retrieval

    M = 8
    config = load_config({"name": "dgr", "mesh": {"sphere": sphere, "resolution": resolution},
                          "model": {"attention": "unnormalized", "beta": 1.0, "mask": "causal"},
                          "positions": {"slices": M, "decay": 1.0, "normalise": True}, "initial": {"kind": "uniform"},
                          "time": {"t_final": t, "dt": dt}, "scheme": {"kind": scheme},
                          "nonlocal": {"method": method, **({"tol": 1e-10} if method == "fast" else {})}})
    W = CausalVelocity(None, M, 1.0, True).kernel()

    def green(rate: float) -> np.ndarray:
        return M * linalg.expm(rate * t * W)[-1, :-1]

    tic = time.process_time()
    with tempfile.TemporaryDirectory() as out:
        if sphere == "S1":
            rows = retrieval(config, [t], modes=[1, 2], codewords=8, out=out + "/r", comm=MPI.COMM_SELF,
                             quiet=True).rows
            weights = codeword_weights(8, score_modes(8, SCORE_WEIGHT_CUTOFF))
            expected = {n: green(n ** 2 * iv(n, 1.0)) for n in (1, 2)}
            expected[0] = sum(w * green(n ** 2 * iv(n, 1.0)) for n, w in enumerate(weights, 1))
        else:
            rows = retrieval(config, [t], observables=["z"], sources=["z"], out=out + "/r", comm=MPI.COMM_SELF,
                             quiet=True).rows
            expected = {1: green(2 * spherical_in(1, 1.0)) / 3.0}
    seconds = time.process_time() - tic
    got = {m: np.array([r["value"] for r in rows if r["mode"] == m]) for m in expected}
    return [float(np.abs(got[m] / expected[m] - 1).max()) for m in expected], seconds, 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("modes", "retrieval"))
    parser.add_argument("--sphere", default="S1", choices=("S1", "S2"))
    parser.add_argument("--resolutions", default="32,64,128")
    parser.add_argument("--scheme", default="dg1")
    parser.add_argument("--t-final", type=float, default=1.0)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--method", default="direct", choices=("direct", "fast"), help="the field (retrieval)")
    args = parser.parse_args()
    measure = mode_errors if args.what == "modes" else retrieval_errors
    previous = None
    for resolution in (int(r) for r in args.resolutions.split(",")):
        extra = {"method": args.method} if args.what == "retrieval" else {}
        errors, first, second = measure(args.sphere, resolution, args.scheme, args.t_final, args.dt, **extra)
        orders = "" if previous is None else "  orders " + " ".join(
            f"{np.log2(a / b):.2f}" for a, b in zip(previous, errors))
        times = f"forward {first:.1f} s, backward {second:.1f} s" if args.what == "modes" else f"{first:.1f} s"
        print(f"{args.sphere} {args.scheme} {resolution}: errors " + " ".join(f"{e:.3e}" for e in errors)
              + orders + f"  ({times} CPU)", flush=True)
        previous = errors


if __name__ == "__main__":
    main()

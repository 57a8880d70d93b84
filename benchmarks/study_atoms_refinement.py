"""After capture, the hybrid run's moments and energy converge as the mesh is
refined, towards large-n quantile tokens of the same model.

S^1, softmax, beta = 9, the ``s1-long-time`` example's density; DG1 with the fast field and
capture on, to ``--t-final`` (default 30: four clusters formed and captured by t ~ 12, two
merged at t ~ 36.5 later), at 256 ... 2048 cells.  The reference is
:func:`meanfield.references.lagrangian_circle.solve_tokens` (quantile tokens, DOP853 at 1e-11),
whose moments and energy are computed with the same observables code as the runs' (direct
field).  Prints, per cell count, the atoms, and the differences of the mean vector, the
second moments and the energy against the tokens at ``--n`` and at ``--n / 2`` (the tokens'
own error).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/study_atoms_refinement.py [--t-final 30] [--n 16384]
"""

from __future__ import annotations

import argparse

import numpy as np

import meanfield
from meanfield.config import load_config
from meanfield.initial import make_initial_density
from meanfield.model import AttentionModel
from meanfield.nonlocal_field import make_evaluator
from meanfield.observables import measure_observables
from meanfield.references.lagrangian_circle import solve_tokens

EXAMPLE = "runs/examples/s1-long-time.toml"
KEYS = ("mean_0", "mean_1", "m2_00", "m2_01", "m2_11", "energy")


def token_observables(density, beta: float, t: float, n: int) -> dict[str, float]:
    """Moments and energy of n quantile tokens at time t."""
    sol = solve_tokens(density, beta, [0.0, t], n)
    angles = sol.angles[-1]
    points = np.column_stack([np.cos(angles), np.sin(angles)])
    evaluator = make_evaluator(AttentionModel(d=2, beta=beta), method="direct")
    return measure_observables(evaluator, points, sol.weights)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--t-final", type=float, default=30.0)
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--cells", default="256,512,1024,2048")
    parser.add_argument("--out", default="runs/study-atoms-refinement")
    args = parser.parse_args()
    base = load_config(EXAMPLE, [f"time.t_final={args.t_final}", "time.outputs=1", "output.xdmf=false"])
    beta = float(base.data["model"]["beta"])
    density = make_initial_density(base.data["initial"], 2)
    ref = token_observables(density, beta, args.t_final, args.n)
    half = token_observables(density, beta, args.t_final, args.n // 2)
    print(f"t = {args.t_final:g}; tokens n = {args.n} (and n/2 for their own error)")
    print(f"{'cells':>6} {'atoms':>5} {'atom mass':>10} " + " ".join(f"{k:>10}" for k in KEYS))
    print(f"{'n/2':>6} {'':>5} {'':>10} " + " ".join(f"{abs(half[k] - ref[k]):10.2e}" for k in KEYS))
    for cells in (int(c) for c in args.cells.split(",")):
        cfg = load_config(EXAMPLE, [f"time.t_final={args.t_final}", "time.outputs=1", "output.xdmf=false",
                                    f"mesh.resolution={cells}"])
        run = meanfield.run(cfg, out=f"{args.out}/{cells}", quiet=True, overwrite=True)
        obs = {k: float(v[-1]) for k, v in run.observables.items()}
        print(f"{cells:6d} {int(obs['atom_count']):5d} {obs['atom_mass']:10.6f} "
              + " ".join(f"{abs(obs[k] - ref[k]):10.2e}" for k in KEYS))


if __name__ == "__main__":
    main()

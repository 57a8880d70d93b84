"""Cost of a long run with atoms: a hybrid (density + atoms) S^1 run at beta = 9 to t = 2000.

The long-time case: softmax, Q = K = V = I, beta = 9, a small multi-mode perturbation
of the uniform density (``runs/examples/s1-clusters.toml``'s), 1024 cells, capture on.
After formation the clusters are captured as atoms; ``atoms.absorb_mass`` sends the residual
density to the atoms once it is below 1e-6, and the run goes on with atoms alone at the
step ``cfl * lipschitz_step / L`` (:mod:`meanfield.atoms.coupling`).  Prints the wall time,
its CPU time (the wall time of a free core), the number of steps and the atoms' history
(count and masses at the outputs).  Run::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_atoms_long.py [--scheme fv|dg1] [--cells 1024]
        [--t-final 2000] [--lipschitz-step 1.0] [--absorb-mass 1e-6] [--method direct|fast|auto] [--out DIR]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import meanfield

EXPRESSION = "1 + 0.05*cos(3*arctan2(y, x)) + 0.05*sin(4*arctan2(y, x) + 1) + 0.02*cos(7*arctan2(y, x))"


def config(scheme: str, cells: int, t_final: float, lipschitz_step: float, absorb_mass: float,
           method: str = "direct") -> dict:
    """The long-time hybrid case."""
    return {"name": "s1-atoms-long", "mesh": {"sphere": "S1", "resolution": cells},
            "model": {"attention": "softmax", "beta": 9.0},
            "initial": {"kind": "expression", "expression": EXPRESSION},
            "scheme": {"kind": scheme}, "nonlocal": {"method": method},
            "time": {"t_final": t_final, "outputs": [t for t in (0.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0,
                                                                  1000.0, 1500.0) if t < t_final] + [t_final]},
            "atoms": {"capture": True, "absorb_mass": absorb_mass, "lipschitz_step": lipschitz_step},
            "output": {"xdmf": False}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="fv")
    parser.add_argument("--cells", type=int, default=1024)
    parser.add_argument("--t-final", type=float, default=2000.0)
    parser.add_argument("--lipschitz-step", type=float, default=1.0)
    parser.add_argument("--absorb-mass", type=float, default=1e-6)
    parser.add_argument("--method", default="direct", help="nonlocal.method (direct, fast, auto)")
    parser.add_argument("--out", default="runs/bench-atoms-long")
    args = parser.parse_args()
    cfg = config(args.scheme, args.cells, args.t_final, args.lipschitz_step, args.absorb_mass, args.method)
    tic, cpu = time.perf_counter(), time.process_time()
    run = meanfield.run(cfg, out=args.out, quiet=True, overwrite=True)
    wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
    obs = run.observables
    print(f"{args.scheme} {args.cells} cells to t = {args.t_final:g}: {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"(on a loaded machine compare CPU), {run.metadata['steps']['steps']} steps")
    for k, t in enumerate(obs["t"]):
        print(f"  t = {t:7.1f}  atoms = {int(obs['atom_count'][k])}  atom mass = {obs['atom_mass'][k]:.12f}  "
              f"mass - 1 = {obs['mass'][k] - 1:.2e}")
    snapshot = np.load(f"{args.out}/snapshots/{len(obs['t']) - 1:04d}.npz")
    angles = np.arctan2(snapshot["atom_positions"][:, 1], snapshot["atom_positions"][:, 0])
    print("  final atoms: angle", np.round(angles, 6), "mass", np.round(snapshot["atom_masses"], 6),
          "id", snapshot["atom_ids"])


if __name__ == "__main__":
    main()

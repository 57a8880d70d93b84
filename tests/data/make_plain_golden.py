"""Write plain_golden.npz: states of the plain solver (no atoms) on the small cases of
tests/helpers/plain_cases.py, the regression check of tests/test_atoms.py.

Generated with the code of commit 6568965 (before the atoms were added to the solver)::

    git worktree add /tmp/main-6568965 6568965
    cd /tmp/main-6568965 && PYTHONPATH=$PWD python <this repo>/tests/data/make_plain_golden.py <this repo>/tests/data
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))
from helpers.plain_cases import CASES, STEPS  # noqa: E402

from meanfield.drivers.pde import build_simulation  # noqa: E402


def main(out: Path) -> None:
    arrays = {}
    for name, config in CASES.items():
        # that commit has no time.tol (no error control): its steps are the CFL steps
        config = {**config, "time": {k: v for k, v in config["time"].items() if k != "tol"}}
        sim = build_simulation(config)
        for _ in range(STEPS):
            sim.step(1.0)
        arrays[name] = sim.checkpoint_state()["state"]
        arrays[name + "-t"] = np.array(sim.t)
    np.savez(out / "plain_golden.npz", **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Write plain_golden.npz: states of the plain solver (no atoms) on small cases, for the
check that ``[atoms] capture = false`` changes nothing (tests/test_atoms.py).

Generated with the code of commit 6568965 (before issue 12's solver changes)::

    git worktree add /tmp/main-6568965 6568965
    cd /tmp/main-6568965 && PYTHONPATH=$PWD python <this repo>/tests/data/make_plain_golden.py <this repo>/tests/data
"""

import sys
from pathlib import Path

import numpy as np

from meanfield.solver import build_simulation

#: (name, config) of each golden case; tests/test_atoms.py runs the same configs.
CASES = {
    f"{sphere}-{scheme}": {
        "mesh": {"sphere": sphere, "resolution": 64 if sphere == "S1" else 2},
        "model": {"beta": 9.0 if sphere == "S1" else 4.0},
        "scheme": {"kind": scheme},
        "nonlocal": {"method": "direct"},
        "time": {"t_final": 1.0, "outputs": 1},
    }
    for sphere in ("S1", "S2") for scheme in ("fv", "dg1")
}
STEPS = 20


def main(out: Path) -> None:
    arrays = {}
    for name, config in CASES.items():
        sim = build_simulation(config)
        for _ in range(STEPS):
            sim.step(1.0)
        arrays[name] = sim.checkpoint_state()["state"]
        arrays[name + "-t"] = np.array(sim.t)
    np.savez(out / "plain_golden.npz", **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Small plain-solver cases (no atoms): S^1 and S^2, FV and DG1, the direct field.

``tests/data/plain_golden.npz`` holds their states after :data:`STEPS` steps as computed by an
older version of the solver (``tests/data/make_plain_golden.py``)."""

from __future__ import annotations

from typing import Any

#: (name, config) of each case.
CASES: dict[str, dict[str, Any]] = {
    f"{sphere}-{scheme}": {
        "mesh": {"sphere": sphere, "resolution": 64 if sphere == "S1" else 2},
        "model": {"beta": 9.0 if sphere == "S1" else 4.0},
        "scheme": {"kind": scheme},
        "nonlocal": {"method": "direct"},
        # the older solver's steps were the CFL steps, which a loose tolerance leaves as they are
        # (every step of these cases is set by the CFL bound at tol = 0.1; 1e-3 would shorten them)
        "time": {"t_final": 1.0, "outputs": 1, "tol": 0.1},
    }
    for sphere in ("S1", "S2") for scheme in ("fv", "dg1")
}
#: Steps taken from t = 0 (the CFL step: about t = 1 on these meshes).
STEPS = 20

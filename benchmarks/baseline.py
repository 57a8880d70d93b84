"""The nonlocal-field package as it was before the transform-based field, loaded from git for comparison.

``load_baseline()`` extracts ``meanfield/nonlocal_field`` and ``meanfield/model.py`` at
:data:`BASELINE_COMMIT` into a temporary package ``meanfield_baseline`` and imports it, so a
benchmark can time the old evaluators next to the current ones in the same process (the
repository keeps no copy of old code).  The old evaluators accept current
``meanfield.model.AttentionModel`` objects (they only read their attributes).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

#: The commit the benchmarks' ratios are measured against (the last one before the transform-based field).
BASELINE_COMMIT = "4692bdb"
_FILES = ["model.py"] + [
    f"nonlocal_field/{name}.py"
    for name in ("__init__", "auto", "base", "direct", "fast", "harmonics", "parallel", "select")
]


def load_baseline(commit: str = BASELINE_COMMIT):
    """Import and return ``meanfield_baseline.nonlocal_field`` built from ``commit``."""
    name = "meanfield_baseline"
    if name in sys.modules:
        return importlib.import_module(f"{name}.nonlocal_field")
    repo = Path(__file__).resolve().parents[1]
    root = Path(tempfile.mkdtemp(prefix="meanfield-baseline-"))
    package = root / name
    (package / "nonlocal_field").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for rel in _FILES:
        text = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:meanfield/{rel}"],
                              check=True, capture_output=True, text=True).stdout
        (package / rel).write_text(text)
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{name}.nonlocal_field")

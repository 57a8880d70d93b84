"""The nonlocal-field package as it was at an earlier commit, loaded from git for comparison.

``load_baseline()`` extracts ``meanfield/nonlocal_field`` (every module it had), ``meanfield/model.py``
and, where it existed, ``meanfield/threads.py`` at :data:`BASELINE_COMMIT` (or the commit given)
into a temporary package ``meanfield_baseline`` and imports it, so a benchmark can time the old
evaluators next to the current ones in the same process (the repository keeps no copy of old
code); one baseline per process.  The old evaluators accept current
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


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def baseline_files(repo: Path, commit: str) -> list[str]:
    """Paths under ``meanfield/`` that the baseline package takes from ``commit``."""
    listed = _git(repo, "ls-tree", "--name-only", commit, "meanfield/model.py", "meanfield/threads.py",
                  "meanfield/nonlocal_field/").split()
    return [path.removeprefix("meanfield/") for path in listed if path.endswith(".py")]


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
    for rel in baseline_files(repo, commit):
        (package / rel).write_text(_git(repo, "show", f"{commit}:meanfield/{rel}"))
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{name}.nonlocal_field")

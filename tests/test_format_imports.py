"""The run-directory format (``meanfield.rundir``) knows no model: it imports only itself, a few
small modules below every model, and libraries.

Read from the sources with :mod:`ast` (every import, also those inside functions and under
``TYPE_CHECKING``), so an import added anywhere in the package fails here.  The meanfield
modules it may import:

* ``collective``, ``threads``, ``_fem``: MPI, thread and dolfinx plumbing (run environment);
* ``version``, ``wording``, ``memory``, ``toml_text``: the version string, how numbers,
  durations, sizes and TOML text are written;
* ``point_masses``: the record of point masses (masses, positions, ids) and their array names,
  below both the atoms' numerics and the format;
* ``times``: when two model times are the same;
* ``sequence``: the tokens' positions along the sequence (``s_k = (k + 1/2) / M``);
* ``spheres``: the descriptors of the meshed spheres (dimension, cell type; numpy-free, below
  every model, and already under ``memory``), which a run's header names.
* ``masks``: the registry of the attention masks (numpy only, importing only ``sequence``), which
  own the run files' slice axes and read their slices back; not the mask kinds' numerics beside it
  (``masks.causal_slices``, ``masks.causal_tokens``).

Not ``atoms``, ``masks.causal_slices``, ``problem``, ``config`` or any other part of the model, the engine
or the drivers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import meanfield.rundir

ALLOWED = {"collective", "threads", "_fem", "version", "wording", "memory", "toml_text", "point_masses", "times",
           "sequence", "spheres", "masks"}
FORBIDDEN = {"atoms", "masks.causal_slices", "problem", "config"}
PACKAGE = Path(meanfield.rundir.__file__).parent


def _meanfield_imports(path: Path) -> set[str]:
    """The meanfield modules a source file imports, as paths below ``meanfield`` (``rundir.layout``, ``atoms``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name.removeprefix("meanfield.") for a in node.names
                         if a.name == "meanfield" or a.name.startswith("meanfield."))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and (node.module == "meanfield" or node.module.startswith("meanfield.")):
                    found.add(node.module.removeprefix("meanfield").lstrip("."))
            else:  # relative to meanfield/rundir/ (level 1) or meanfield/ (level 2)
                base = "rundir" if node.level == 1 else ""
                assert node.level <= 2, f"{path}: import above the meanfield package"
                found.add(".".join(p for p in (base, node.module or "") if p))
    return found


def _outside(found: set[str]) -> list[str]:
    """The imports that are neither the format's own nor allowed (an allowed module by its whole name:
    ``masks``, not the modules of that package)."""
    return sorted(i for i in found if i.split(".")[0] != "rundir" and i not in ALLOWED)


def test_the_format_imports_no_model():
    imports = {path.name: _meanfield_imports(path) for path in sorted(PACKAGE.glob("*.py"))}
    assert len(imports) >= 10, "the rundir package's modules were not found"
    outside = {name: _outside(found) for name, found in imports.items() if _outside(found)}
    assert not outside, f"rundir imports outside the allowed set: {outside}"
    assert not FORBIDDEN & ALLOWED


def test_the_check_sees_a_forbidden_import(tmp_path):
    """The parser finds relative, absolute and function-level imports of the model."""
    source = tmp_path / "bad.py"
    source.write_text("from ..atoms import Atoms\nimport meanfield.problem\n"
                      "from meanfield.masks.causal_slices import x\n"
                      "def f():\n    from ..config import Config\n    from . import layout\n")
    assert _meanfield_imports(source) == {"atoms", "problem", "masks.causal_slices", "config", "rundir"}
    assert _outside(_meanfield_imports(source)) == sorted(FORBIDDEN)


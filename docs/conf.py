"""Sphinx configuration of the meanfield documentation (``make docs``)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package of this checkout, not an installed one
sys.path.insert(0, str(HERE / "_ext"))

from meanfield import __version__  # noqa: E402

project = "meanfield"
author = "the meanfield developers"
copyright = f"2026, {author}"
release = version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "meanfield_docs",
]

exclude_patterns = ["_build", "MODEL.md"]
nitpicky = False
default_role = "code"

autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False  # the API page lists members with autodoc
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"meanfield {release}"
html_static_path = ["_css"]  # the pictures under _static/ are copied as the pages use them
html_css_files = ["meanfield.css"]  # code blocks wrap long lines instead of clipping them

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
    "sphinx_gallery.gen_gallery",
    "meanfield_docs",
]

exclude_patterns = ["_build", "MODEL.md"]

# The demos: literate Python scripts in ../demos (rst in their comment blocks), run at every
# build (run_stale_examples) and written as pages into docs/demos (generated, not committed).  A
# demo that raises fails the build.  Each runs a small case on one rank and writes only into a
# temporary directory of its own.
sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "demos"),
    "gallery_dirs": str(HERE / "demos"),
    "filename_pattern": r"/demo_",  # every demo is executed
    "run_stale_examples": True,  # executed at every build, not only when its source changed
    "abort_on_example_error": False,  # run them all, then fail the build naming each that raised
    "write_computation_times": False,
    "download_all_examples": False,
    "show_signature": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "within_subsection_order": "meanfield_docs.demo_order",
}
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

"""The documentation as readers get it: ``sphinx -b html docs`` (as ``make docs`` builds it),
then the home page and the style sheet checked in the HTML.  The demos' code is not executed
here (``-D plot_gallery=0``): ``make docs`` executes it, and fails when a demo fails.  Under
``make test`` the site is the one ``make docs`` has just built (``MEANFIELD_DOCS_SITE``)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: The pictures the home page shows: the two time scales, a causal run, a validation study.
HOME_PICTURES = ("s1-long-time.png", "s1-causal.png", "validation-errors.png")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The HTML site: the one ``make docs`` built just before (``MEANFIELD_DOCS_SITE``, set by
    ``make test``), else one built here."""
    built = os.environ.get("MEANFIELD_DOCS_SITE")
    if built and (Path(built) / "index.html").is_file():
        return Path(built)
    if any(importlib.util.find_spec(name) is None for name in ("sphinx", "furo", "sphinx_gallery")):
        pytest.skip("sphinx, furo and sphinx-gallery are not installed (pip install -e .[docs])")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-q", "-D", "plot_gallery=0", "-b", "html", str(DOCS),
                           str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
def test_home_page_shows_what_the_package_does(site):
    """Not a bare table of contents: the three pictures (committed under docs/_static), each
    with a caption, before the contents."""
    page = (site / "index.html").read_text()
    images = re.findall(r'<img alt="[^"]+" src="_images/([^"]+)"', page)
    assert tuple(images) == HOME_PICTURES
    for name in images:
        assert (site / "_images" / name).stat().st_size > 5_000
    assert page.count("<figcaption>") >= 3
    assert page.index("_images/s1-long-time.png") < page.index('class="toctree-wrapper')


@pytest.mark.slow
def test_code_blocks_wrap_instead_of_being_clipped(site):
    """Every page links the project's style sheet, whose rule wraps long lines of code blocks."""
    sheet = (site / "_static" / "meanfield.css").read_text()
    rule = re.search(r"\.highlight pre,\s*pre\.literal-block\s*\{([^}]*)\}", sheet)
    assert rule is not None and "white-space: pre-wrap" in rule.group(1)
    for page in ("index.html", "outputs.html", "causal.html"):
        assert re.search(r'<link rel="stylesheet"[^>]*href="_static/meanfield\.css', (site / page).read_text()), page

"""spacetime.png keeps a cluster one cell wide visible: 1024 cells drawn into about 530 pixels are
max-pooled into columns of at least 1.5 pixels (``meanfield run`` and ``meanfield plot`` run as users
run them, then the picture's drawn data and its pixels are checked)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cli import cli
from helpers.pictures import figures_of
from matplotlib import colormaps
from matplotlib.collections import QuadMesh
from matplotlib.image import imread

import meanfield

#: Cells of ``circle(1024)`` (cell i spans theta in 2 pi [i, i + 1] / 1024) made dense, spread over
#: the pixel phases of the picture.
DENSE_CELLS = (40, 171, 255, 306, 400, 530, 600, 677, 750, 811, 900, 1001)
CENTRES = np.angle(np.exp(2j * np.pi * (np.array(DENSE_CELLS) + 0.5) / 1024))
DENSE = " + ".join(f"where(abs(arctan2(y, x) - {theta:.6f}) < 0.002, 1, 0)" for theta in CENTRES)
#: A uniform density with twelve cells about 10 times denser, run for one short step.
ONE_CELL = f"""name = "one-cell"
[mesh]
sphere = "S1"
resolution = 1024
[model]
beta = 1.0
[initial]
kind = "expression"
expression = "1 + 20*({DENSE})"
[time]
t_final = 0.01
outputs = 1
[output]
xdmf = false
"""


@pytest.fixture(scope="module")
def one_cell(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one-cell")
    (folder / "case.toml").write_text(ONE_CELL)
    for args in (["run", "case.toml", "--out", "run", "--quiet"], ["plot", "run", "--no-movie", "--quiet"]):
        done = cli(args, folder)
        assert done.returncode == 0, done.stderr
    return folder / "run"


@pytest.mark.slow
def test_clusters_one_cell_wide_are_drawn_and_visible(one_cell, monkeypatch):
    run = meanfield.load_run(one_cell)
    last = run.densities[-1]
    assert set(np.flatnonzero(last > 5 * np.median(last))) == set(DENSE_CELLS)  # each dense cell alone
    figure = figures_of(monkeypatch, one_cell)["spacetime"]
    ax = figure.axes[0]
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    drawn = np.asarray(mesh.get_array()).reshape(len(run.times), -1)
    columns = drawn.shape[1]
    box = ax.get_window_extent()  # pixels at the saved dpi
    assert box.width / columns >= 1.0  # every column covers a pixel centre
    edges = mesh.get_coordinates()[0, :, 0]
    column = np.searchsorted(edges, CENTRES) - 1
    np.testing.assert_allclose(drawn[-1, column], last[list(DENSE_CELLS)], rtol=1e-12)  # each peak is drawn
    assert "max of its" in figure.axes[1].get_ylabel()  # the colour bar says what a column shows
    # and each is on the picture: the top row of the image (t = 0.01) has its colour near its theta
    pixels = imread(one_cell / "plots" / "spacetime.png")[..., :3]
    row = pixels[int(pixels.shape[0] - box.y1) + 3]
    for i, theta in zip(DENSE_CELLS, CENTRES):
        x = box.x0 + (theta + np.pi) / (2 * np.pi) * box.width
        near = row[int(x) - 2:int(x) + 3]
        colour = np.asarray(colormaps["viridis"](mesh.norm(last[i]))[:3])
        assert np.abs(near - colour).max(axis=1).min() < 0.05, (i, near, colour)

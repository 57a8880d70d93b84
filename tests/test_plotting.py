"""Plots of runs (meanfield.plotting): map geometry (antimeridian and pole cuts, orthographic
culling), colour scales shared by a movie's frames, S^1 segments, the files plot_run writes,
the movie encoders, and that nothing touches pyplot or the backend."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.sphere import random_sphere_points
from scipy.spatial.transform import Rotation

from meanfield.initial import vmf_density
from meanfield.mesh import circle, icosphere
from meanfield.plotting.circle import circle_segments, token_histogram
from meanfield.plotting.data import corner_values
from meanfield.plotting.geometry import Pieces, split_at_poles
from meanfield.plotting.projections import Mollweide, Orthographic
from meanfield.plotting.series import time_series
from meanfield.plotting.sphere_maps import SphereMaps, densest_direction, make_projections, sphere_map
from meanfield.plotting.style import color_norm

pytestmark = pytest.mark.filterwarnings("error")
SQRT2 = np.sqrt(2.0)
CENTERS = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, -0.2], [-1.0, 0.05, 0.1]])
CENTERS /= np.linalg.norm(CENTERS, axis=1)[:, None]


@pytest.fixture(autouse=True)
def pyplot_untouched():
    """Every test leaves pyplot's figures and the backend as they were."""
    import matplotlib

    def fignums() -> list[int]:
        return sys.modules["matplotlib.pyplot"].get_fignums() if "matplotlib.pyplot" in sys.modules else []

    backend, before = matplotlib.get_backend(), fignums()
    yield
    assert matplotlib.get_backend() == backend
    assert fignums() == before  # no figure went to pyplot


def _mesh(level: int, rotation: Rotation | None = None):
    m = icosphere(level)
    return (m.points if rotation is None else rotation.apply(m.points)), m.cells


def _bumps(x: np.ndarray, kappa: float = 20.0) -> np.ndarray:
    return sum(vmf_density(x.reshape(-1, 3), c, kappa) for c in CENTERS).reshape(x.shape[:-1]) / len(CENTERS)


def _covering_counts(xy: np.ndarray, probes: np.ndarray) -> np.ndarray:
    """How many map triangles (n, 3, 2) contain each probe point (m, 2)."""
    a, b, c = (xy[None, :, k] for k in range(3))
    p = probes[:, None]

    def cross(u, v, w):
        return (v[..., 0] - u[..., 0]) * (w[..., 1] - u[..., 1]) - (v[..., 1] - u[..., 1]) * (w[..., 0] - u[..., 0])

    inside = (cross(a, b, p) >= 0) & (cross(b, c, p) >= 0) & (cross(c, a, p) >= 0)
    return inside.sum(axis=1)


# --- map geometry -----------------------------------------------------------------------

@pytest.mark.parametrize("rotated", [False, True])
def test_mollweide_cuts_antimeridian_and_poles(rotated):
    """Unrotated icosphere: edges along the antimeridian, vertices at the poles; rotated: cells
    straddling the antimeridian and containing the poles.  Either way the map is tiled once."""
    level = 3
    vertices, cells = _mesh(level, Rotation.from_euler("zyx", [0.3, 0.7, 0.2]) if rotated else None)
    tri = Mollweide().triangles(vertices, cells)
    if rotated:
        assert len(tri.pieces) > len(cells)  # something was cut
    areas = tri.signed_areas()
    assert areas.min() > 0  # orientation kept: no triangle folded over
    assert np.ptp(tri.xy[..., 0], axis=1).max() < 2 * SQRT2  # none spans more than 180 degrees of longitude
    assert areas.sum() == pytest.approx(4 * np.pi, rel=5e-3)  # the ellipse, up to straight edges
    probes = np.random.default_rng(0).uniform(-1, 1, (6000, 2)) * [2 * SQRT2, SQRT2]
    radius = np.hypot(probes[:, 0] / (2 * SQRT2), probes[:, 1] / SQRT2)
    probes = probes[radius < 0.99]  # not in the thin rim that straight edges leave
    counts = _covering_counts(tri.xy, probes)
    on_edge = _covering_counts(tri.xy, probes + 1e-9) != counts  # probes on a shared edge count twice
    assert np.all(counts[~on_edge] == 1)


def test_pole_inside_a_cell_is_split_and_pole_on_an_edge():
    """Level 0: the poles lie on icosahedron edges; a rotated cell can hold a pole inside."""
    for vertices, cells in (_mesh(0), _mesh(1, Rotation.from_euler("x", 0.05))):
        pieces = split_at_poles(Pieces.from_mesh(vertices, cells))
        tri = Mollweide().triangles(vertices, cells)
        assert tri.signed_areas().min() > 0
        assert np.ptp(tri.xy[..., 0], axis=1).max() < 2 * SQRT2
        assert len(pieces) > len(cells)


@pytest.mark.parametrize("projection", [Mollweide(), Orthographic([0.2, -0.5, 0.8])])
def test_cut_pieces_carry_vertex_values_exactly(projection):
    """A linear function of x is linear on every flat cell: its DG1 values at the cut corners are exact."""
    a = np.array([0.3, -1.2, 0.7])
    vertices, cells = _mesh(2, Rotation.from_euler("zyx", [1.0, 0.4, -0.3]))
    tri = projection.triangles(vertices, cells)
    assert np.allclose(tri.pieces.values(vertices[cells] @ a), tri.pieces.corners @ a, atol=1e-12)


def test_mollweide_central_longitude():
    view = Mollweide(central_longitude=90.0)
    xy, _ = view.points(np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 1.0]]))
    assert np.allclose(xy[:2], [[0.0, 0.0], [-2 * SQRT2, 0.0]]) and np.allclose(xy[2], [0.0, SQRT2])
    tri = view.triangles(*_mesh(2))
    assert tri.signed_areas().min() > 0 and np.ptp(tri.xy[..., 0], axis=1).max() < 2 * SQRT2


def test_orthographic_culls_back_and_clips_limb():
    vertices, cells = _mesh(3, Rotation.from_euler("y", 0.3))
    view = Orthographic([1.0, 1.0, 0.5])
    tri = view.triangles(vertices, cells)
    depth = tri.pieces.corners @ view.center
    assert depth.min() > -1e-12  # only the front
    front = np.all(vertices[cells] @ view.center > 0, axis=1)
    back = np.all(vertices[cells] @ view.center < 0, axis=1)
    kept = np.zeros(len(cells), bool)
    kept[tri.pieces.index] = True
    assert kept[front].all() and not kept[back].any()
    assert tri.signed_areas().min() > 0
    assert tri.signed_areas().sum() == pytest.approx(np.pi, rel=5e-3)  # the unit disk
    assert np.linalg.norm(tri.xy, axis=-1).max() <= 1 + 1e-12


def test_orthographic_default_looks_at_the_densest_cell():
    vertices, cells = _mesh(3)
    peak = np.array([0.3, -0.8, 0.5]) / np.linalg.norm([0.3, -0.8, 0.5])
    rho = vmf_density(vertices[cells].mean(axis=1) / np.linalg.norm(vertices[cells].mean(axis=1), axis=1)[:, None],
                      peak, 30.0)
    center = densest_direction(vertices, cells, rho)
    assert center @ peak > np.cos(0.1)
    fig = sphere_map(vertices, cells, rho)
    assert fig.axes[1].get_title() == Orthographic(center).title


# --- colour scales and movies -------------------------------------------------------------

def test_color_norm_log_floor_and_undershoot():
    from matplotlib.colors import LogNorm

    norm = color_norm(np.array([-1.5, 0.0, 1e-9, 0.2, 30.0]), log=True)
    assert isinstance(norm, LogNorm) and norm.vmax == 30.0 and norm.vmin == pytest.approx(30.0 * 1e-4)
    lin = color_norm(np.array([-1.5, 0.2, 30.0]))
    assert (lin.vmin, lin.vmax) == (-1.5, 30.0)
    assert color_norm(np.array([0.5, 2.0]), vmin=1.0).vmin == 1.0



def test_color_norm_of_an_empty_density():
    """A hybrid run's density can be zero everywhere (all mass in atoms): the log scale stays
    valid (matplotlib refuses vmin = vmax = 0) and so does the linear one."""
    norm = color_norm(np.zeros(6), log=True)
    assert 0 < norm.vmin < norm.vmax == 1.0
    lin = color_norm(np.zeros(6))
    assert lin.vmin == 0.0 and lin.vmax > 0.0

def test_movie_frames_share_one_colour_scale(tmp_path, monkeypatch):
    """A uniform density growing 1, 4, 7, 10: with one scale the map colour follows the value,
    frame after frame.  The frames are read as rendered (the RGB frames piped to ffmpeg, here a
    stand-in that stores them), not through the GIF's palette."""
    from matplotlib import colormaps

    from meanfield.plotting.movie import write_movie

    bindir = tmp_path / "bin"
    bindir.mkdir()
    _fake_ffmpeg(bindir)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    vertices, cells = _mesh(2)
    levels = np.array([1.0, 4.0, 7.0, 10.0])
    maps = SphereMaps(make_projections(["mollweide"], None), mesh=(vertices, cells), norm=color_norm(levels))
    paths = write_movie(maps.figure, lambda i: maps.update(np.full(len(cells), levels[i]), title=f"frame {i}"),
                        range(len(levels)), tmp_path / "movie", fps=5, dpi=50)
    assert paths == [tmp_path / "movie.gif", tmp_path / "movie.mp4"]
    assert _gif_frames(paths[0]) == len(levels)
    w, h = (round(s * 50) for s in maps.figure.get_size_inches())
    frames = np.fromfile(paths[1], dtype=np.uint8).reshape(len(levels), h, w, 3)
    ax = maps.figure.axes[0]
    x, y = ax.transData.transform((0.5, 0.3))  # a point inside the ellipse (layout frozen after frame 0)
    for k, value in enumerate(levels):
        pixel = frames[k, int(h - y), int(x)].astype(float)
        expected = np.array(colormaps["viridis"](maps.norm(value))[:3]) * 255
        assert np.abs(pixel - expected).max() <= 1.0, (k, pixel, expected)


def _no_ffmpeg(monkeypatch, tmp_path: Path) -> None:
    """No ffmpeg on PATH and none from imageio-ffmpeg."""
    import imageio_ffmpeg

    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", lambda: (_ for _ in ()).throw(RuntimeError("none")))


def _fake_ffmpeg(folder: Path) -> Path:
    """An 'ffmpeg' that stores the raw frames it is given (checks what write_movie pipes)."""
    script = folder / "ffmpeg"
    script.write_text(f"#!{sys.executable}\nimport sys, shutil\n"
                      "with open(sys.argv[-1], 'wb') as out:\n    shutil.copyfileobj(sys.stdin.buffer, out)\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_mp4_goes_through_ffmpeg_or_is_skipped(tmp_path, monkeypatch, caplog):
    from meanfield.plotting.circle import CircleLines
    from meanfield.plotting.movie import write_movie

    m = circle(32)
    lines = CircleLines(circle_segments(m.points, m.cells), m.cells, color_norm(np.array([0.0, 3.0])))
    frames = [np.full(32, v) for v in (0.5, 1.0, 2.0)]
    atoms = [m.points[[k, 2 * k + 5]] for k in range(3)]  # point masses moving along
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _fake_ffmpeg(bindir)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    paths = write_movie(lines.figure, lambda i: lines.update(frames[i], points=atoms[i], masses=[0.2, 0.1 * i]),
                        range(3), tmp_path / "a", dpi=40)
    assert [p.name for p in paths] == ["a.gif", "a.mp4"]
    w, h = (round(s * 40) for s in lines.figure.get_size_inches())
    assert paths[1].stat().st_size == 3 * w * h * 3  # three RGB frames
    _no_ffmpeg(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger="meanfield.plotting"):
        paths = write_movie(lines.figure, lambda i: lines.update(frames[i]), range(3), tmp_path / "b", dpi=40)
    assert [p.name for p in paths] == ["b.gif"] and "no ffmpeg" in caplog.text


def test_real_ffmpeg_writes_an_mp4(tmp_path):
    """ffmpeg on PATH, else imageio-ffmpeg's (a dependency): a real MP4 either way."""
    from meanfield.plotting.circle import CircleLines
    from meanfield.plotting.movie import write_movie

    m = circle(32)
    lines = CircleLines(circle_segments(m.points, m.cells), m.cells, color_norm(np.array([0.0, 3.0])))
    paths = write_movie(lines.figure, lambda i: lines.update(np.full(32, 0.5 + i)), range(4), tmp_path / "m", dpi=45)
    assert paths[1].read_bytes()[4:8] == b"ftyp"


# --- S^1 ----------------------------------------------------------------------------------

def test_circle_segments_cover_the_circle_once():
    """Rotated mesh, every other cell listed clockwise, one cell across theta = pi."""
    m = circle(9)
    angle = 0.25
    vertices = m.points @ np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
    cells = m.cells.copy()
    cells[::2] = cells[::2, ::-1]
    seg = circle_segments(vertices, cells)
    edges = seg.edges()
    assert len(seg.index) == 10 and edges[0] == -np.pi and edges[-1] == np.pi
    assert np.allclose(seg.theta[1:, 0], seg.theta[:-1, 1]) and np.all(np.diff(edges) > 0)
    # DG1 values of cos(theta) at the cell ends: exact at mesh vertices, continuous across the cut
    values = seg.values(vertices[cells][..., 0])
    at_vertex = ~np.isclose(np.abs(seg.theta), np.pi)
    assert np.allclose(values[at_vertex], np.cos(seg.theta[at_vertex]))
    assert values[0, 0] == pytest.approx(values[-1, 1])


def test_token_histogram_is_a_density():
    x = random_sphere_points(np.random.default_rng(3), 5000, 2)
    hist = token_histogram(x, 50)
    assert hist.sum() * 2 * np.pi / 50 == pytest.approx(1.0)


# --- time series --------------------------------------------------------------------------

def test_time_series_panels():
    t = np.linspace(0, 5, 11)
    obs = {"t": t, "order": t / 5, "energy": 1 + t, "rho_max": np.exp(t), "rho_min": np.exp(-t)}
    assert [ax.get_title() for ax in time_series(obs).axes] == ["order parameter |mean|", "energy E",
                                                                 "extreme densities"]
    particles = {"t": t, "order": t / 5, "energy": 1 + t, "rho_max": np.full(11, np.nan),
                 "clusters": np.maximum(1, 6 - t).round()}
    axes = time_series(particles).axes
    assert len(axes) == 3 and {ax.get_xscale() for ax in axes} == {"linear"}  # one decade: a linear time axis
    with pytest.raises(ValueError, match="'t'"):
        time_series({"order": t})


# --- plot_run -----------------------------------------------------------------------------

def _pde_s2(dg1: bool, frames: int = 5):
    vertices, cells = _mesh(3)
    times = np.linspace(0, 2, frames)
    kappas = np.linspace(2.0, 30.0, frames)
    corners = np.array([_bumps(vertices[cells], k) for k in kappas])
    centroids = vertices[cells].mean(axis=1)
    areas = np.full(len(cells), 4 * np.pi / len(cells))
    return SimpleNamespace(
        sphere="S2", vertices=vertices, cells=cells, centroids=centroids, areas=areas, times=times,
        densities=corners.mean(axis=2), vertex_densities=corners if dg1 else None,
        observables={"t": times, "order": 0.3 + 0.1 * times, "energy": 1 + times, "rho_max": corners.max(axis=(1, 2)),
                     "rho_min": corners.min(axis=(1, 2)), "mass": np.ones(frames)},
        metadata={"kind": "pde", "name": "bumps"}, path=None)


def _particles(d: int, frames: int = 4, n: int = 600):
    rng = np.random.default_rng(1)
    base = random_sphere_points(rng, n, d)
    anchors = random_sphere_points(rng, 3, d)[rng.integers(0, 3, n)]
    points = np.array([(1 - s) * base + s * anchors for s in np.linspace(0, 0.95, frames)])
    points /= np.linalg.norm(points, axis=-1, keepdims=True)
    times = np.arange(frames, dtype=float)
    return SimpleNamespace(times=times, points=points, path=None, metadata={"kind": "particles", "name": f"tokens{d}"},
                           observables={"t": times, "order": np.linspace(0.1, 0.5, frames), "energy": 1 + times,
                                        "rho_max": np.full(frames, np.nan), "rho_min": np.full(frames, np.nan)})


def _gif_frames(path: Path) -> int:
    from PIL import Image

    with Image.open(path) as im:
        return im.n_frames


@pytest.mark.parametrize("dg1", [False, True])
def test_plot_run_pde_s2(tmp_path, dg1, monkeypatch):
    _no_ffmpeg(monkeypatch, tmp_path)  # GIF only
    paths = plot_run_checked(_pde_s2(dg1), tmp_path, max_frames=4, dpi=50)
    assert sorted(p.name for p in paths) == ["density.gif", "density_final.png", "density_initial.png",
                                             "observables.png"]
    assert _gif_frames(tmp_path / "density.gif") == 4  # 5 outputs, at most 4 frames


def test_plot_run_pde_s1_dg1_and_log(tmp_path):
    m = circle(64)
    theta = np.arctan2(m.points[:, 1], m.points[:, 0])
    times = np.linspace(0, 1, 6)
    corner = np.array([np.exp(k * np.cos(3 * theta))[m.cells] for k in np.linspace(0, 8, 6)])
    corner /= corner.mean(axis=(1, 2), keepdims=True) * 2 * np.pi
    run = SimpleNamespace(sphere="S1", vertices=m.points, cells=m.cells, times=times, densities=corner.mean(axis=2),
                          vertex_densities=corner, observables={"t": times, "order": times}, metadata={"name": "s1"},
                          path=None)
    paths = plot_run_checked(run, tmp_path, movie=True, fmt="svg", dpi=40)
    assert {p.name for p in paths} >= {"density.svg", "spacetime.svg", "observables.svg", "density.gif"}
    assert _gif_frames(tmp_path / "density.gif") == 6


@pytest.mark.parametrize("d", [2, 3, 4])
def test_plot_run_particles(tmp_path, d, monkeypatch):
    _no_ffmpeg(monkeypatch, tmp_path)  # GIF only
    run = _particles(d)
    (tmp_path / "diagnostics.csv").write_text("t,clusters,largest_cluster\n" + "".join(
        f"{float(t)!r},{c},0.5\n" for t, c in zip(run.times, [5, 3, 3, 2])))
    run.path = tmp_path
    paths = plot_run_checked(run, tmp_path / "plots", movie=d != 4, dpi=40)
    names = {p.name for p in paths}
    expected = {2: {"density.png", "spacetime.png", "tokens.gif"}, 3: {"tokens_initial.png", "tokens_final.png",
                                                                        "tokens.gif"}, 4: set()}[d]
    assert names == expected | {"observables.png"}
    if d != 4:
        assert _gif_frames(tmp_path / "plots" / "tokens.gif") == 4


def plot_run_checked(run, out: Path, **kw) -> list[Path]:
    """plot_run, then every file exists and is non-empty."""
    from meanfield.plotting import plot_run

    paths = plot_run(run, out, **kw)
    for p in paths:
        assert p.is_file() and p.stat().st_size > 0, p
    return paths


def test_run_without_a_mesh_is_refused(tmp_path):
    from meanfield.plotting import plot_run

    run = SimpleNamespace(times=np.zeros(1), densities=np.ones((1, 4)), sphere="S2", metadata={"kind": "pde"})
    with pytest.raises(TypeError, match="no vertices, cells"):
        plot_run(run, tmp_path)


def test_no_pyplot_no_backend_switch_and_a_light_import(tmp_path):
    """In a fresh interpreter: importing the package loads no matplotlib; plotting never loads
    pyplot and leaves the backend alone (a notebook's inline backend keeps working)."""
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import meanfield, meanfield.plotting
        assert "matplotlib" not in sys.modules, "import meanfield.plotting loaded matplotlib"
        import matplotlib
        matplotlib.use("svg")
        from meanfield.mesh import icosphere
        from meanfield.plotting import plot_run, sphere_map
        from types import SimpleNamespace
        m = icosphere(1)
        rho = np.linspace(0.5, 1.5, len(m.cells))
        fig = sphere_map(m.points, m.cells, rho, log=True, points=m.points[:3], masses=[0.2, 0.3, 0.5])
        run = SimpleNamespace(sphere="S2", vertices=m.points, cells=m.cells, times=np.array([0.0, 1.0]),
                              densities=np.array([rho, rho[::-1]]), vertex_densities=None,
                              observables={{"t": np.array([0.0, 1.0]), "order": np.array([0.1, 0.2])}},
                              metadata={{}}, path=None)
        plot_run(run, {str(tmp_path)!r}, dpi=30)
        assert "matplotlib.pyplot" not in sys.modules, "pyplot was imported"
        assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
    """)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "density.gif").is_file()


def test_sphere_map_accepts_only_cell_or_vertex_data():
    _, cells = _mesh(1)
    with pytest.raises(ValueError, match="expected"):
        corner_values(cells, np.ones((len(cells), 2)))


def test_plot_command_on_real_runs_and_a_foreign_folder(tmp_path, capsys):
    """`meanfield plot RUN` reads a PDE (DG1, S^2) and a particle run directory and writes their
    pictures into RUN/plots; a folder holding other files is refused and left alone."""
    from mpi4py import MPI

    import meanfield
    from meanfield.cli import main

    pde = meanfield.run({"name": "p", "mesh": {"sphere": "S2", "resolution": 2}, "scheme": {"kind": "dg1"},
                         "time": {"t_final": 0.2, "outputs": 2}, "output": {"xdmf": False}},
                        out=tmp_path / "pde", comm=MPI.COMM_SELF, quiet=True)
    assert pde.vertex_densities is not None and pde.vertex_densities.shape == (3, 320, 3)
    assert main(["plot", str(tmp_path / "pde"), "--no-movie"]) == 0
    assert {p.name for p in (tmp_path / "pde" / "plots").iterdir()} >= {"observables.png", "density_final.png"}
    meanfield.run_particles({"name": "t", "mesh": {"sphere": "S1"}, "time": {"t_final": 0.2, "outputs": 2},
                             "particles": {"dt": 0.1}}, n=50, out=tmp_path / "tok", comm=MPI.COMM_SELF, quiet=True)
    assert main(["plot", str(tmp_path / "tok"), "--no-movie"]) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "pde"), "--out", str(mine)]) == 2
    assert "not meanfield plots" in capsys.readouterr().err and [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_bundled_ffmpeg_when_none_is_on_path(tmp_path, monkeypatch):
    from meanfield.plotting.movie import ffmpeg_executable

    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    found = ffmpeg_executable()
    assert found is not None and "imageio_ffmpeg" in found


def test_plot_controls_times_scale_frames(tmp_path, monkeypatch):
    """--times picks the stills, --vmin/--vmax fix every colour scale, --frames writes one PNG per
    movie frame, --fps sets the GIF's frame duration; checked on the figures' own settings."""
    from PIL import Image

    import meanfield.plotting.run_plots as run_plots

    _no_ffmpeg(monkeypatch, tmp_path)
    drawn = []
    original = run_plots.sphere_map
    monkeypatch.setattr(run_plots, "sphere_map", lambda *a, **k: drawn.append(original(*a, **k)) or drawn[-1])
    run = _pde_s2(False)
    paths = plot_run_checked(run, tmp_path, max_frames=3, dpi=40, times=[0.0, 0.6, 10 ** -12], vmin=0.01, vmax=2.0,
                             frames=True, fps=4.0)
    names = sorted(p.name for p in paths)
    assert names == ["density.gif", "density_frame0000.png", "density_frame0001.png", "density_frame0002.png",
                     "density_t0.5.png", "density_t0.png", "observables.png"]
    assert [[t.get_text() for t in fig.texts] for fig in drawn] == [["bumps   t = 0"], ["bumps   t = 0.5"]]
    for fig in drawn:
        assert {(c.norm.vmin, c.norm.vmax) for ax in fig.axes for c in ax.collections if c.get_array() is not None} \
            == {(0.01, 2.0)}
    with Image.open(tmp_path / "density.gif") as im:
        assert im.n_frames == 3 and im.info["duration"] == 250


def test_plot_controls_on_s1_lines(tmp_path):
    """S^1: the lines of --times in density.png, and the density axis from --vmin/--vmax."""
    from meanfield.plotting import circle_density

    m = circle(32)
    fig = circle_density(m.points, m.cells, [np.full(32, 0.2), np.full(32, 0.3)], times=[0.0, 1.0], vmin=0.1,
                         vmax=0.5)
    assert fig.axes[0].get_ylim() == (0.1, 0.5 * 1.05) and len(fig.axes[0].get_legend().get_texts()) == 2


@pytest.mark.parametrize("args, message", [
    (["--times", "0,99"], "--times 99: outside the run's output times"),
    (["--times", "a"], "--times a: expected comma-separated numbers"),
    (["--vmin", "2", "--vmax", "1"], "vmin must be below vmax"),
    (["--log", "--vmin", "0"], "--vmin 0: a log scale needs vmin > 0"),
    (["--centre", "10"], "--centre 10: expected LON,LAT"),
    (["--fps", "0"], "--fps 0: must be > 0"),
])
def test_plot_controls_refused(tmp_path, capsys, args, message):
    """``meanfield plot`` (its ``main`` in this process): exit 2, one line naming the option, no
    plots folder."""
    from mpi4py import MPI

    import meanfield
    from meanfield.cli import main

    meanfield.run({"name": "p", "mesh": {"sphere": "S1", "resolution": 16}, "time": {"t_final": 0.2, "outputs": 2},
                   "output": {"xdmf": False}}, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)
    capsys.readouterr()
    code = main(["plot", str(tmp_path / "run"), *args])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert out == "" and not (tmp_path / "run" / "plots").exists()


def test_mass_drift_panel_and_layer_ends():
    """The mass panel shows m(t) - m(0); each layer end is a vertical line on every panel."""
    t = np.linspace(0, 2, 9)
    obs = {"t": t, "order": t / 2, "mass": 1 + 1e-13 * t}
    fig = time_series(obs, layer_ends=[0.5, 1.5])
    assert [ax.get_title() for ax in fig.axes] == ["order parameter |mean|", "mass drift m(t) - m(0)"]
    drift = fig.axes[1].get_lines()[0].get_ydata()
    np.testing.assert_allclose(drift, 1e-13 * t, rtol=1e-2, atol=1e-17)
    for ax in fig.axes:
        assert [line.get_xdata()[0] for line in ax.get_lines()[1:]] == [0.5, 1.5]


def test_run_data_layer_ends():
    from meanfield.plotting.data import run_data

    run = _pde_s2(False)
    run.config = {"model": {"layers": [{"t_end": 0.5}, {"t_end": 1.0, "beta": 2.0}, {"t_end": 3.0}]}}
    assert run_data(run).layer_ends == (0.5, 1.0)
    run.config = {"model": {"layers": None}}
    assert run_data(run).layer_ends == ()

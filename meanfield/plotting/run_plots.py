"""Every picture of a run in one call: :func:`plot_run` (behind ``meanfield plot RUN``).

Files written into ``out_dir`` (``FMT`` is ``fmt``, e.g. png):

========================  ==========================================================
PDE on S^2                ``density_initial.FMT``, ``density_final.FMT`` (Mollweide +
                          orthographic maps), ``density.gif`` / ``.mp4``
PDE on S^1                ``density.FMT`` (density at up to 5 times),
                          ``spacetime.FMT`` (theta-t image), ``density.gif`` / ``.mp4``
tokens on S^2             ``tokens_initial.FMT``, ``tokens_final.FMT``, ``tokens.gif`` / ``.mp4``
tokens on S^1             as the PDE on S^1 with the tokens' histogram (about sqrt(n) bins),
                          ``tokens.gif`` / ``.mp4``
every run                 ``observables.FMT`` (time series)
========================  ==========================================================

Movies use one colour scale (or density axis) for all frames; the orthographic view looks at
the heaviest cluster (density or atom) of the last frame throughout, each still picture at its
own (unless ``center`` is given); a hybrid run's residual density below a floor does not set
the colour scale (:mod:`.focus`).  The atoms of a
hybrid run (point masses) are open red circles of area proportional to mass, on
every density picture: on the maps, on the theta axis of the S^1 lines (in each line's colour
on the several-times figure), and at their (theta, t) on the space-time image.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..sphere import subsample
from .circle import CircleLines, circle_density, circle_segments, circle_spacetime, histogram_bins, token_histogram
from .data import RunData, run_data
from .focus import colour_limits, heaviest_direction
from .movie import FPS, MAX_FRAMES, frame_indices, write_movie
from .series import time_series
from .sphere_maps import (
    VIEWS,
    SphereMaps,
    View,
    densest_point,
    make_projections,
    sphere_map,
    token_map,
)
from .style import color_norm

AUTO_LOG_RANGE = 100.0  # log=None picks a log scale when max / median density exceeds this


def auto_log(values: np.ndarray) -> bool:
    """Whether a log scale shows these densities better: their peak is far above their bulk."""
    positive = np.asarray(values)[np.asarray(values) > 0]
    return bool(positive.size) and positive.max() > AUTO_LOG_RANGE * np.median(positive)


class _Writer:
    """Saves figures and movies into one folder and remembers the paths."""

    def __init__(self, out_dir: Path, fmt: str, dpi: float, movie: bool, max_frames: int, fps: float) -> None:
        self.out_dir, self.fmt, self.dpi = out_dir, fmt, dpi
        self.movie, self.max_frames, self.fps = movie, max_frames, fps
        self.written: list[Path] = []

    def figure(self, fig: Figure, name: str) -> None:
        path = self.out_dir / f"{name}.{self.fmt}"
        fig.savefig(path, dpi=self.dpi)
        self.written.append(path)

    def animation(self, fig: Figure, update: Callable[[int], None], count: int, name: str) -> None:
        if self.movie:
            self.written += write_movie(fig, update, frame_indices(count, self.max_frames), self.out_dir / name,
                                        fps=self.fps, dpi=self.dpi)


def _title(data: RunData, i: int) -> str:
    return f"{data.name}   t = {data.times[i]:.4g}"


def _atoms_at(data: RunData, i: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    point_masses = data.point_masses()
    return (None, None) if point_masses is None else point_masses[i]


def density_movie_maps(data: RunData, vertices: np.ndarray, cells: np.ndarray, *, log: bool,
                       views: list[View], center: np.ndarray | None = None) -> SphereMaps:
    """The maps of an S^2 density movie: the orthographic view looks at the heaviest cluster of
    the last frame (density or atom) unless ``center`` is given, and a hybrid run's colour
    scale ignores residual density (:func:`~.focus.colour_limits`)."""
    if center is None:
        center = heaviest_direction(vertices, cells, data.frame(-1), *_atoms_at(data, -1))
    limits = colour_limits() if data.point_masses() is not None else {}
    return SphereMaps(make_projections(views, center), mesh=(vertices, cells),
                      norm=color_norm(data.frames(), log=log, **limits))


def _sphere_density(data: RunData, v: np.ndarray, c: np.ndarray, w: _Writer, log: bool, views: list[View],
                    center: np.ndarray | None) -> None:
    atoms = partial(_atoms_at, data)
    limits = colour_limits() if data.point_masses() is not None else None
    for name, i in (("density_initial", 0), ("density_final", len(data.times) - 1)):
        points, masses = atoms(i)
        look = heaviest_direction(v, c, data.frame(i), points, masses) if center is None else center
        w.figure(sphere_map(v, c, data.frame(i), views=views, center=look, log=log, title=_title(data, i),
                            points=points, masses=masses, limits=limits), name)
    maps = density_movie_maps(data, v, c, log=log, views=views, center=center)

    def update(i: int) -> None:
        points, masses = atoms(i)
        maps.update(data.frame(i), points=points, masses=masses, title=_title(data, i))

    w.animation(maps.figure, update, len(data.times), "density")


def _circle_density(data: RunData, vertices: np.ndarray, cells: np.ndarray, frames: np.ndarray,
                    averages: np.ndarray, w: _Writer, log: bool, name: str) -> None:
    shown = frame_indices(len(data.times), 5)
    atoms = data.point_masses()
    w.figure(circle_density(vertices, cells, frames[shown], times=data.times[shown], log=log, title=data.name,
                            atoms=None if atoms is None else [atoms[i] for i in shown]), "density")
    w.figure(circle_spacetime(vertices, cells, data.times, averages, log=log, title=data.name, atoms=atoms),
             "spacetime")
    lines = CircleLines(circle_segments(vertices, cells), cells, color_norm(frames, log=log))

    def update(i: int) -> None:
        points, masses = atoms[i] if atoms is not None else (None, None)
        lines.update(frames[i], title=_title(data, i), points=points, masses=masses)

    w.animation(lines.figure, update, len(data.times), name)


def _sphere_tokens(data: RunData, points: np.ndarray, w: _Writer, views: list[View], center: np.ndarray | None,
                   max_points: int) -> None:
    for name, i in (("tokens_initial", 0), ("tokens_final", len(data.times) - 1)):
        w.figure(token_map(points[i], views=views, center=center, max_points=max_points, title=_title(data, i)), name)
    center = densest_point(subsample(points[-1], max_points)) if center is None else center
    maps = SphereMaps(make_projections(views, center), markers="tokens")
    w.animation(maps.figure, lambda i: maps.update(points=subsample(points[i], max_points), title=_title(data, i)),
                len(data.times), "tokens")


def plot_run(result: Any, out_dir: str | Path, *, movie: bool = True, fmt: str = "png", log: bool | None = None,
             views: tuple[View, ...] = VIEWS, center: np.ndarray | None = None, max_frames: int = MAX_FRAMES,
             fps: float = FPS, dpi: float = 100, max_points: int = 4000) -> list[Path]:
    """Write the pictures of a PDE or particle run (see the module docstring for the files).

    Parameters
    ----------
    result
        A PDE or particle run result (see :mod:`meanfield.plotting.data` for what is read).
    out_dir
        Folder for the files (created).
    movie
        Also write the movie (GIF; MP4 when ffmpeg is on PATH).
    fmt
        Format of the still figures: any matplotlib format (png, pdf, svg).
    log
        Log colour scale / density axis; default: when the peak density exceeds 100 times the
        median (clustered runs).
    views
        S^2 projections: names ("mollweide", "orthographic") or projection objects.
    center
        (3,) direction the orthographic view looks at; default: the densest point (of each
        still; of the last frame for the movie).
    max_frames, fps, dpi
        Movie length cap (frames spread over the output times), frame rate, resolution.
    max_points
        Tokens drawn on S^2 maps (a fixed subsample of larger runs).

    Returns
    -------
    list of Path
        The files written.
    """
    check_format(fmt)
    data = run_data(result)
    if not len(data.times):
        raise ValueError(f"run {data.name!r} has no output times to plot")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = _Writer(out, fmt, dpi, movie, max_frames, fps)
    if "t" in data.observables:
        w.figure(time_series(data.observables, title=data.name), "observables")
    if data.kind == "pde":
        vertices, cells, densities = data.vertices, data.cells, data.densities
        assert vertices is not None and cells is not None and densities is not None  # run_data requires them
        log = auto_log(densities) if log is None else log
        if data.sphere == "S2":
            _sphere_density(data, vertices, cells, w, log, list(views), center)
        else:
            _circle_density(data, vertices, cells, data.frames(), densities, w, log, "density")
        return w.written
    points = data.points
    assert points is not None  # a particle run: run_data requires its points (and reads no other kind)
    if data.sphere == "S2":
        _sphere_tokens(data, points, w, list(views), center, max_points)
    elif data.sphere == "S1":
        from ..mesh import circle

        mesh = circle(histogram_bins(points.shape[1]))
        hist = np.array([token_histogram(p, len(mesh.cells)) for p in points])
        _circle_density(data, mesh.points, mesh.cells, hist, hist, w, auto_log(hist) if log is None else log, "tokens")
    return w.written


def check_format(fmt: str) -> None:
    """Refuse a still-picture format matplotlib cannot write (ValueError naming ``--format``)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if fmt not in formats:
        raise ValueError(f"--format {fmt}: not a format matplotlib writes; one of {', '.join(sorted(formats))}")


#: Stems of the files :func:`plot_run` writes (with any extension).
PLOT_STEMS = ("observables", "density", "density_initial", "density_final", "spacetime", "tokens", "tokens_initial",
              "tokens_final")


def plot_run_directory(run_dir: str | Path, out: str | Path | None = None, *, overwrite: bool = False,
                       **options: Any) -> list[Path]:
    """Read a run directory and write its pictures (``meanfield plot RUN``).

    Parameters
    ----------
    run_dir
        A PDE or particle run directory.
    out
        Folder for the pictures (default ``RUN/plots``).  It must be missing, empty, or hold
        only pictures this function writes: nothing else is ever overwritten, and those only
        with ``overwrite``.
    overwrite
        Replace the pictures of an earlier call.
    **options
        Passed to :func:`plot_run`.
    """
    from ..runner.directory import check_output_folder
    from ..runner.results import load_run

    check_format(options.get("fmt", "png"))
    folder = check_output_folder(Path(out) if out is not None else Path(run_dir) / "plots",
                                 lambda name: Path(name).stem in PLOT_STEMS, "meanfield plots", overwrite=overwrite)
    return plot_run(load_run(run_dir), folder, **options)

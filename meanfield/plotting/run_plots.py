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
every run                 ``observables.FMT`` (time series, the config's own
                          observables included); a batch of prompts: this alone
causal PDE runs           the pictures above of the whole token distribution, and
                          ``positions.FMT`` (S^1: the density over (theta, s) at up to
                          four times), ``slices_initial.FMT`` / ``slices_final.FMT``
                          (S^2: four positions' maps), ``position_clusters.FMT``
                          (each position's number of clusters over time, and when
                          it clusters), ``attention.FMT`` (the attention map a(t; s, s')),
                          ``attending.FMT`` and ``attending.csv`` (whom chosen
                          positions attend to: absolute shares over the source
                          positions and over the sphere's clusters)
========================  ==========================================================

``times`` replaces the stills' times (S^2: initial and final; S^1: up to five spread over the
run) by the outputs nearest to the times given: on S^2 ``density_tT.FMT`` (``tokens_tT.FMT``)
for each, T the output time; on S^1 their lines in ``density.FMT``.  ``frames`` also writes
every movie frame as ``density_frameNNNN.png`` (``tokens_frameNNNN.png``).  ``vmin`` and
``vmax`` fix the colour scale (density axis) of every picture.

Movies use one colour scale (or density axis) for all frames; the orthographic view looks at
the heaviest cluster (density or atom) of the last frame throughout, each still picture at its
own (unless ``center`` is given); a hybrid run's residual density below a floor does not set
the colour scale (:mod:`.focus`).  The atoms of a
hybrid run (point masses) are open red circles of area proportional to mass, on
every density picture: on the maps, on the theta axis of the S^1 lines (in each line's colour
on the several-times figure), and at their (theta, t) on the space-time image.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..sphere import subsample
from .circle import CircleLines, circle_density, circle_segments, circle_spacetime, histogram_bins, token_histogram
from .data import RunData, run_data
from .focus import colour_limits, heaviest_direction, residual_floor
from .movie import FPS, MAX_FRAMES, frame_indices, write_movie
from .series import time_series
from .sphere_maps import (
    VIEWS,
    SphereMaps,
    View,
    densest_point,
    make_projections,
    sphere_map,
    token_density,
    token_map,
)
from .style import color_norm

AUTO_LOG_RANGE = 100.0  # log=None picks a log scale when max / median density exceeds this


def auto_log(values: np.ndarray) -> bool:
    """Whether a log scale shows these densities better: their peak is far above their bulk."""
    positive = np.asarray(values)[np.asarray(values) > 0]
    return bool(positive.size) and positive.max() > AUTO_LOG_RANGE * np.median(positive)


@dataclass(frozen=True)
class Scale:
    """The colour scale (density axis) of every picture of a run: log or linear, its limits."""

    log: bool
    vmin: float | None = None
    vmax: float | None = None

    def norm(self, values: np.ndarray):
        """:func:`~meanfield.plotting.style.color_norm` of ``values`` with these settings."""
        return color_norm(values, log=self.log, vmin=self.vmin, vmax=self.vmax)


def check_scale(log: bool | None, vmin: float | None, vmax: float | None) -> None:
    """Refuse colour limits that make no scale (ValueError naming ``--vmin`` / ``--vmax``)."""
    for name, value in (("--vmin", vmin), ("--vmax", vmax)):
        if value is not None and not np.isfinite(value):
            raise ValueError(f"{name} {value}: must be a finite number")
    if vmin is not None and vmax is not None and not vmin < vmax:
        raise ValueError(f"--vmin {vmin:g} --vmax {vmax:g}: vmin must be below vmax")
    if log and vmin is not None and vmin <= 0:
        raise ValueError(f"--vmin {vmin:g}: a log scale needs vmin > 0")
    if log and vmax is not None and vmax <= 0:
        raise ValueError(f"--vmax {vmax:g}: a log scale needs vmax > 0")


def still_indices(times: np.ndarray, wanted: Sequence[float]) -> list[int]:
    """The outputs nearest to the ``wanted`` times, in order, each once (ValueError naming ``--times``
    for a time outside the run's outputs)."""
    span = max(float(times[-1] - times[0]), 1.0) * 1e-9
    for t in wanted:
        if not times[0] - span <= t <= times[-1] + span:
            raise ValueError(f"--times {t:g}: outside the run's output times [{times[0]:g}, {times[-1]:g}]")
    return list(dict.fromkeys(int(np.argmin(np.abs(times - t))) for t in wanted))


class _Writer:
    """Saves figures and movies into one folder and remembers the paths."""

    def __init__(self, out_dir: Path, fmt: str, dpi: float, movie: bool, max_frames: int, fps: float,
                 frames: bool = False) -> None:
        self.out_dir, self.fmt, self.dpi = out_dir, fmt, dpi
        self.movie, self.max_frames, self.fps, self.frames = movie, max_frames, fps, frames
        self.written: list[Path] = []

    def figure(self, fig: Figure, name: str) -> None:
        path = self.out_dir / f"{name}.{self.fmt}"
        fig.savefig(path, dpi=self.dpi)
        self.written.append(path)

    def animation(self, fig: Figure, update: Callable[[int], None], count: int, name: str) -> None:
        if self.movie:
            self.written += write_movie(fig, update, frame_indices(count, self.max_frames), self.out_dir / name,
                                        fps=self.fps, dpi=self.dpi, frame_files=self.frames)


def _title(data: RunData, i: int) -> str:
    return f"{data.heading}   t = {data.times[i]:.4g}"


def _stills(data: RunData, prefix: str, shown: list[int] | None) -> list[tuple[str, int]]:
    """Names and output indices of the S^2 stills: initial and final, or the times asked for."""
    if shown is None:
        return [(f"{prefix}_initial", 0), (f"{prefix}_final", len(data.times) - 1)]
    return [(f"{prefix}_t{data.times[i]:g}", i) for i in shown]


def _atoms_at(data: RunData, i: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    point_masses = data.point_masses()
    return (None, None) if point_masses is None else point_masses[i]


def _residual_limits(data: RunData) -> dict[str, float]:
    """A hybrid run's colour limits that leave its residual density out (:func:`~.focus.colour_limits`)."""
    return colour_limits() if data.point_masses() is not None else {}


def density_movie_maps(data: RunData, vertices: np.ndarray, cells: np.ndarray, *, log: bool,
                       views: list[View], center: np.ndarray | None = None, vmin: float | None = None,
                       vmax: float | None = None) -> SphereMaps:
    """The maps of an S^2 density movie: the orthographic view looks at the heaviest cluster of
    the last frame (density or atom) unless ``center`` is given, and a hybrid run's colour
    scale ignores residual density (:func:`~.focus.colour_limits`); ``vmin``/``vmax`` override."""
    if center is None:
        center = heaviest_direction(vertices, cells, data.frame(-1), *_atoms_at(data, -1))
    return SphereMaps(make_projections(views, center), mesh=(vertices, cells),
                      norm=color_norm(data.frames(), log=log, vmin=vmin, vmax=vmax, **_residual_limits(data)))


def _sphere_density(data: RunData, v: np.ndarray, c: np.ndarray, w: _Writer, scale: Scale, views: list[View],
                    center: np.ndarray | None, shown: list[int] | None) -> None:
    atoms = partial(_atoms_at, data)
    limits = _residual_limits(data)
    for name, i in _stills(data, "density", shown):
        points, masses = atoms(i)
        look = heaviest_direction(v, c, data.frame(i), points, masses) if center is None else center
        w.figure(sphere_map(v, c, data.frame(i), views=views, center=look, log=scale.log, vmin=scale.vmin,
                            vmax=scale.vmax, title=_title(data, i), points=points, masses=masses,
                            limits=limits), name)
    maps = density_movie_maps(data, v, c, log=scale.log, views=views, center=center, vmin=scale.vmin,
                              vmax=scale.vmax)

    def update(i: int) -> None:
        points, masses = atoms(i)
        maps.update(data.frame(i), points=points, masses=masses, title=_title(data, i))

    w.animation(maps.figure, update, len(data.times), "density")


def _circle_density(data: RunData, vertices: np.ndarray, cells: np.ndarray, frames: np.ndarray,
                    averages: np.ndarray, w: _Writer, scale: Scale, name: str, shown: list[int] | None) -> None:
    shown = list(frame_indices(len(data.times), 5)) if shown is None else shown
    atoms = data.point_masses()
    # a hybrid run's log axis reaches down to the residual floor: not fitted to the one time whose density is left
    vmin = scale.vmin if scale.vmin is not None or atoms is None or not scale.log else residual_floor(2)
    w.figure(circle_density(vertices, cells, frames[shown], times=[float(data.times[i]) for i in shown],
                            log=scale.log, title=data.heading,
                            atoms=None if atoms is None else [atoms[i] for i in shown], vmin=vmin, vmax=scale.vmax),
             "density")
    w.figure(circle_spacetime(vertices, cells, data.times, averages, log=scale.log, title=data.heading, atoms=atoms,
                              vmin=scale.vmin, vmax=scale.vmax, dpi=w.dpi), "spacetime")
    lines = CircleLines(circle_segments(vertices, cells), cells, scale.norm(frames))

    def update(i: int) -> None:
        points, masses = atoms[i] if atoms is not None else (None, None)
        lines.update(frames[i], title=_title(data, i), points=points, masses=masses)

    w.animation(lines.figure, update, len(data.times), name)


def _sphere_tokens(data: RunData, points: np.ndarray, w: _Writer, views: list[View], center: np.ndarray | None,
                   max_points: int, shown: list[int] | None) -> None:
    for name, i in _stills(data, "tokens", shown):
        w.figure(token_map(points[i], views=views, center=center, max_points=max_points, title=_title(data, i)), name)
    center = densest_point(subsample(points[-1], max_points)) if center is None else center
    ends = [token_density(points[i], subsample(points[i], max_points)) for i in (0, -1)]
    maps = SphereMaps(make_projections(views, center), markers="tokens",
                      norm=color_norm(np.concatenate(ends), log=True))

    def update(i: int) -> None:
        drawn = subsample(points[i], max_points)
        maps.update(points=drawn, title=_title(data, i), densities=token_density(points[i], drawn))

    w.animation(maps.figure, update, len(data.times), "tokens")


class SlicePictures:
    """The pictures of a mask's position slices, registered under the mask's name
    (:func:`slice_pictures`); a mask without its own draws none and takes no ``attending``."""

    def check(self, data: RunData, attending_positions: Sequence[float] | None) -> None:
        """Refuse ``attending`` positions this mask cannot show, before anything is drawn."""
        if attending_positions is not None:
            raise ValueError("--attending: only a causal run (model.mask = 'causal') has token positions")

    def draw(self, data: RunData, result: Any, w: _Writer, scale: Scale, shown: list[int] | None,
             attending_positions: Sequence[float] | None) -> None:
        """Write the pictures of the slices of the run ``result`` (its ``data``)."""


#: The slices' pictures by mask name (:func:`slice_pictures`).
_SLICE_PICTURES: dict[str, SlicePictures] = {}


def slice_pictures(mask: str) -> Callable[[type[SlicePictures]], type[SlicePictures]]:
    """Registers the decorated :class:`SlicePictures` as the pictures of the mask called ``mask``."""

    def register(cls: type[SlicePictures]) -> type[SlicePictures]:
        _SLICE_PICTURES[mask] = cls()
        return cls

    return register


@slice_pictures("causal")
class CausalPictures(SlicePictures):
    """The pictures of a causal run's positions (module docstring)."""

    def check(self, data: RunData, attending_positions: Sequence[float] | None) -> None:
        from ..analysis.attending import attending_slices

        assert data.positions is not None
        if attending_positions is not None:
            attending_slices(data.positions, attending_positions)

    def draw(self, data: RunData, result: Any, w: _Writer, scale: Scale, shown: list[int] | None,
             attending_positions: Sequence[float] | None) -> None:
        from ..analysis.attending import attending, attending_slices, write_attending
        from ..analysis.attention_maps import attention_map
        from ..analysis.clusters import analyse_positions
        from ..sphere import sphere_area
        from .position_figures import attending_figure, attention_figure, position_clusters, position_images, slice_maps

        assert data.positions is not None and data.slice_densities is not None and data.vertices is not None
        assert data.cells is not None
        positions, slices = data.positions, data.slice_densities
        T, M = len(data.times), len(positions)
        picked = shown if shown is not None else sorted({round(i) for i in np.linspace(0, T - 1, min(T, 4))})
        log = scale.log
        assert data.sphere is not None  # a PDE run's
        if data.sphere.dimension == 1:  # a curve: the positions' densities as images over (theta, s)
            w.figure(position_images(data.vertices, data.cells, positions, data.times[picked], slices[picked], log=log,
                                     vmin=scale.vmin, vmax=scale.vmax, title=data.title), "positions")
        else:
            values = data.slice_vertex_densities if data.slice_vertex_densities is not None else slices
            picks = sorted({round(k) for k in np.linspace(0, M - 1, min(M, 4))})
            for name, i in (("initial", 0), ("final", T - 1)):
                w.figure(slice_maps(data.vertices, data.cells, positions, values[i], picks, log=log, vmin=scale.vmin,
                                    vmax=scale.vmax, title=f"{data.title}   t = {data.times[i]:g}"), f"slices_{name}")
        counts = np.array([history.counts for history in analyse_positions(result)]).T  # (T, M)
        w.figure(position_clusters(data.times, positions, counts, data.by_position.get("rho_max"),
                                   1.0 / sphere_area(data.vertices.shape[1]), title=data.title), "position_clusters")
        times = data.times[sorted({round(i) for i in np.linspace(0, T - 1, min(T, 3))})]
        w.figure(attention_figure([(float(t), attention_map(result, float(t))) for t in times], positions,
                                  title=f"{data.name}: what each position draws from the positions before it"),
                 "attention")
        items = attending(result, [float(t) for t in (data.times[shown] if shown is not None else times)],
                          attending_slices(positions, attending_positions))
        w.figure(attending_figure(items, title=f"{data.name}: whom a position attends to (absolute shares)"),
                 "attending")
        w.written.append(write_attending(w.out_dir / "attending.csv", items))


def plot_run(result: Any, out_dir: str | Path, *, movie: bool = True, fmt: str = "png", log: bool | None = None,
             views: tuple[View, ...] = VIEWS, center: np.ndarray | None = None, max_frames: int = MAX_FRAMES,
             fps: float = FPS, dpi: float = 100, max_points: int = 4000, times: Sequence[float] | None = None,
             vmin: float | None = None, vmax: float | None = None, frames: bool = False,
             attending: Sequence[float] | None = None) -> list[Path]:
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
    times
        The stills at the outputs nearest to these times (module docstring).
    vmin, vmax
        Limits of the colour scale (density axis) of every picture.
    frames
        Also write every movie frame as a PNG file.
    attending
        Causal runs: the positions (in [0, 1]; the nearest slices) whose attention attending.FMT
        and attending.csv show (default the last).

    Returns
    -------
    list of Path
        The files written.
    """
    check_format(fmt)
    check_scale(log, vmin, vmax)
    if not fps > 0:
        raise ValueError(f"--fps {fps:g}: must be > 0")
    data = run_data(result)
    if not len(data.times):
        raise ValueError(f"run {data.name!r} has no output times to plot")
    shown = None if times is None else still_indices(data.times, times)
    pictures = _SLICE_PICTURES.get(data.mask.name, SlicePictures())
    pictures.check(data, attending)  # refused before anything is drawn
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = _Writer(out, fmt, dpi, movie, max_frames, fps, frames)
    if "t" in data.observables:
        w.figure(time_series(data.observables, title=data.title, layer_ends=data.layer_ends,
                             own_observables=data.own_observables), "observables")
    if data.run_type == "pde":
        vertices, cells, densities = data.vertices, data.cells, data.densities
        assert vertices is not None and cells is not None and densities is not None  # run_data requires them
        scale = Scale(auto_log(densities) if log is None else log, vmin, vmax)
        assert data.sphere is not None  # a PDE run's
        if data.sphere.dimension == 2:  # a surface: maps
            _sphere_density(data, vertices, cells, w, scale, list(views), center, shown)
        else:
            _circle_density(data, vertices, cells, data.frames(), densities, w, scale, "density", shown)
        pictures.draw(data, result, w, scale, shown, attending)
        return w.written
    points = data.points
    assert points is not None  # a particle run: run_data requires its points (and reads no other run type)
    if points.ndim == 4:  # a batch of prompts: the observables (means over the prompts) only
        return w.written
    dimension = data.sphere.dimension if data.sphere is not None else None  # None: tokens in d > 3, no pictures
    if dimension == 2:
        _sphere_tokens(data, points, w, list(views), center, max_points, shown)
    elif dimension == 1:
        from ..mesh import circle

        mesh = circle(histogram_bins(points.shape[1]))
        hist = np.array([token_histogram(p, len(mesh.cells)) for p in points])
        scale = Scale(auto_log(hist) if log is None else log, vmin, vmax)
        _circle_density(data, mesh.points, mesh.cells, hist, hist, w, scale, "tokens", shown)
    return w.written


def check_format(fmt: str) -> None:
    """Refuse a still-picture format matplotlib cannot write (ValueError naming ``--format``)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if fmt not in formats:
        raise ValueError(f"--format {fmt}: not a format matplotlib writes; one of {', '.join(sorted(formats))}")


#: Stems of the files :func:`plot_run` writes (with any extension).
PLOT_STEMS = ("observables", "density", "density_initial", "density_final", "spacetime", "tokens", "tokens_initial",
              "tokens_final", "positions", "slices_initial", "slices_final", "position_clusters", "attention",
              "attending")
#: Stems of the stills at chosen times and of the movie frames.
PLOT_STEM_PATTERN = re.compile(r"(density|tokens)_(t.+|frame[0-9]{4})")


def is_plot_file(name: str) -> bool:
    """Whether a file name is one :func:`plot_run` writes."""
    stem = Path(name).stem
    return stem in PLOT_STEMS or PLOT_STEM_PATTERN.fullmatch(stem) is not None


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
    from ..rundir.directory import check_output_folder
    from ..rundir.results import load_run

    check_format(options.get("fmt", "png"))
    folder = check_output_folder(Path(out) if out is not None else Path(run_dir) / "plots",
                                 is_plot_file, "meanfield plots", overwrite=overwrite)
    return plot_run(load_run(run_dir), folder, **options)

"""``meanfield plot``: pictures of a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import Options, Subparsers, add_overwrite, add_quiet
from .terminal import echo
from .values import direction, numbers


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("plot", help="pictures of a run: S^2 maps or S^1 lines, time series, a movie")
    p.add_argument("run_dir", help="a PDE or particle run directory")
    p.add_argument("--out", help="folder for the pictures (default RUN_DIR/plots)")
    p.add_argument("--format", default="png", help="format of the still pictures (png, pdf, svg)")
    p.add_argument("--no-movie", action="store_true", help="no movie (GIF, and MP4 through ffmpeg: the system's or "
                   "imageio-ffmpeg's)")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--log", action="store_true", default=None, help="log colour scale")
    scale.add_argument("--linear", action="store_false", dest="log", help="linear colour scale")
    p.add_argument("--times", metavar="T1,T2,...", help="the stills at the outputs nearest to these times (S2: one "
                   "map density_tT per time instead of the initial and final ones; S1: their lines in density)")
    p.add_argument("--vmin", type=float, default=None, help="lower end of the colour scale (density axis)")
    p.add_argument("--vmax", type=float, default=None, help="upper end of the colour scale (density axis)")
    p.add_argument("--centre", metavar="LON,LAT", help="S2: the point (degrees) the orthographic view looks at "
                   "(default: the densest point)")
    p.add_argument("--fps", type=float, default=8.0, help="frames per second of the movie (default 8)")
    p.add_argument("--frames", action="store_true", help="also every movie frame as a PNG (density_frameNNNN.png)")
    p.add_argument("--attending", metavar="S1,S2,...", help="causal runs: the token positions in [0, 1] whose "
                   "attention attending.png and attending.csv show (default the last position)")
    add_overwrite(p, "replace the pictures of an earlier `meanfield plot` in the folder")
    add_quiet(p, "no list of the files written")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..collective import on_root
    from ..plotting import plot_run_directory

    comm = options.comm  # MPI starts here, before any work
    times = None if args.times is None else numbers(args.times, "--times")
    attending = None if args.attending is None else numbers(args.attending, "--attending")
    centre = None if args.centre is None else direction(args.centre)

    def draw() -> list[str]:
        return [str(p) for p in plot_run_directory(args.run_dir, options.out, overwrite=options.overwrite,
                                                   movie=not args.no_movie, fmt=args.format, log=args.log,
                                                   times=times, vmin=args.vmin, vmax=args.vmax, center=centre,
                                                   fps=args.fps, frames=args.frames, attending=attending)]

    paths = on_root(comm, draw)
    for path in paths if not options.quiet else []:
        echo(f"wrote {path}")
    if options.quiet and paths:
        echo(f"results: {Path(paths[0]).parent}")

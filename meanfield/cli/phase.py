"""``meanfield phase``: the clustering phase diagram of a config (batches of prompts over a (beta, t) grid)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Options, Subparsers, add_memory_check, add_overwrite, add_quiet, add_set, given_settings
from .terminal import echo
from .values import number_list

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize


def number_range(text: str) -> list[float]:
    """``--betas``, ``--at``: comma-separated numbers, or ``START:STOP:COUNT`` (COUNT values from START
    to STOP, both included)."""
    import numpy as np

    if ":" not in text:
        return number_list(float, "number")(text)
    parts = text.split(":")
    try:
        start, stop, count = float(parts[0]), float(parts[1]), int(parts[2])
        if len(parts) != 3 or count < 1:
            raise ValueError
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers or START:STOP:COUNT, got {text!r}") \
            from None
    return [float(v) for v in np.linspace(start, stop, count)]


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("phase", help="clustering phase diagram: batches of prompts over (beta, t), the "
                              "share of clustered pairs (2312.10794, section 6)")
    p.add_argument("config", help="TOML config: the model, the initial density (uniform for the paper's "
                   "diagram), particles.seed, sampler and dt")
    p.add_argument("--betas", type=number_range, required=True, metavar="LIST_OR_RANGE",
                   help="inverse temperatures: comma-separated, or START:STOP:COUNT (e.g. 0.1:9:90)")
    p.add_argument("--at", type=number_range, required=True, metavar="T1,T2,...",
                   help="times at which the prompts' statistics are taken: comma-separated, or START:STOP:COUNT")
    p.add_argument("--d", type=number_list(int, "integer"), default=None, dest="ds", metavar="LIST",
                   help="dimensions d (tokens on S^{d-1}; default particles.d, else the mesh's)")
    p.add_argument("--n", type=int, default=None, help="tokens per prompt (default particles.n, else 32)")
    p.add_argument("--prompts", type=int, default=None,
                   help="prompts per grid point (default: particles.prompts where the config asks for more than one, "
                   "else 64)")
    p.add_argument("--attention", default=None, help="softmax or unnormalized (default: the config's)")
    p.add_argument("--per-prompt", action="store_true", default=None,
                   help="[model.random]: every prompt draws its own weights (model.random.seed + b)")
    p.add_argument("--device", default=None,
                   help="cpu (numpy) or gpu (JAX: pip install 'meanfield[gpu]'); default: particles.device")
    p.add_argument("--precision", default=None, help="float64 or float32 (default: particles.precision)")
    p.add_argument("--out", help="study directory (default: runs/<name>-phase)")
    p.add_argument("--no-plots", action="store_true", help="phase.csv only, no phase.png")
    add_overwrite(p, "redo a phase study already in --out")
    add_set(p)
    add_quiet(p)
    add_memory_check(p)
    p.set_defaults(handler=main, sizer=size)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..studies.phase import phase

    settings = given_settings(args, ("ds", "n", "prompts", "attention", "per_prompt", "device", "precision"))
    result = phase(args.config, args.betas, args.at, plots=not args.no_plots, **settings, **options.keywords())
    echo(f"results: {result.path}")


def size(args: argparse.Namespace, overrides: list[str], where: dict[str, Any]) -> JobSize:
    """The job of this command line as ``meanfield check phase ...`` sizes it (``where``: ``out``,
    ``ranks``, ``cores``; :mod:`meanfield.studies.sizing`)."""
    from ..studies.sizing import phase_size

    return phase_size(args.config, overrides, betas=args.betas, times=args.at, ds=args.ds, n=args.n,
                      prompts=args.prompts, attention=args.attention, device=args.device, precision=args.precision,
                      **where)

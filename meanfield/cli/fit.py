"""``meanfield fit``: fit a mean-field transformer's weights so that inputs go to targets."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Options, Subparsers, add_common, given_settings
from .terminal import echo

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("fit", help="fit model weights (the adjoint's gradient, L-BFGS-B) so that the density "
                              "at t_final meets a target; fit.csv, fitted.toml and pictures")
    p.add_argument("config", help="TOML config (no atoms; a [fit] table gives the settings left out here)")
    p.add_argument("--param", action="append", default=[], metavar="PATH",
                   help="a parameter to fit by its config path: model.beta, model.layers[*].V (every layer's V, "
                        "all entries), model.layers[2].V[0][1], model.ffn.W; repeatable")
    p.add_argument("--target", action="append", default=[], metavar="TARGET",
                   help="a density expression in x, y, z, a run directory (its final density) or a .npy file of "
                        "tokens (m, d); repeatable with one --input each (pairs with shared weights)")
    p.add_argument("--input", action="append", default=[], metavar="EXPR",
                   help="the input density of the pair of the --target of the same rank (default: the config's "
                        "[initial])")
    p.add_argument("--loss", choices=["mmd", "observables", "ot", "w2"],
                   help="squared MMD (kernel e^{kappa <x,y>}), observables' squared errors, the Sinkhorn "
                        "divergence, or on S^1 the exact squared 2-Wasserstein distance (default mmd)")
    p.add_argument("--observable", action="append", default=[], metavar="[NAME=]EXPR",
                   help="an observable of --loss observables; repeatable")
    p.add_argument("--values", type=_numbers, metavar="C1,C2,...",
                   help="with --loss observables: the observables' target values (instead of a --target measure)")
    p.add_argument("--kappa", type=float, help="the MMD kernel's kappa (default 1)")
    p.add_argument("--epsilon", type=float, help="the Sinkhorn divergence's blur (default 0.05)")
    p.add_argument("--running", action="store_true", default=None, help="add the running cost (the loss "
                   "integrated over [0, t_final])")
    p.add_argument("--l2", type=float, help="weight of the l2 regulariser (default 0)")
    p.add_argument("--l1", type=float, help="weight of the l1 regulariser (default 0)")
    p.add_argument("--max-iter", type=int, help="L-BFGS-B iterations in all (default 100; a resumed fit counts "
                   "the earlier ones)")
    p.add_argument("--check-particles", type=int, metavar="N",
                   help="move N tokens sampled from each input with the fitted weights and report their loss "
                        "against the target beside the density's (particles.csv)")
    add_common(p, "fit folder (default: runs/<name>-fit; the same fit again there continues from its last "
                  "iterate)")
    p.set_defaults(handler=main, sizer=size)


def _numbers(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def main(args: argparse.Namespace, options: Options) -> None:
    from ..config import ConfigError
    from ..training.fit import fit

    targets = list(args.target)
    if args.values is not None:
        if targets:
            raise ConfigError("--values: the observables' values are the target; not with --target")
        targets = [args.values]
    result = fit(args.config, args.param, targets, inputs=args.input, observables=args.observable,
                 **given_settings(args, ("loss", "kappa", "epsilon", "running", "l2", "l1", "max_iter",
                                         "check_particles")), **options.keywords())
    echo(f"fitted loss {result.loss:.6g}; results: {result.path}/fit.csv, {result.path}/fitted.toml")


def size(args: argparse.Namespace, overrides: list[str], where: dict[str, Any]) -> JobSize:
    """The job of this command line as ``meanfield check fit ...`` sizes it (``where``: ``out``,
    ``ranks``, ``cores``; :mod:`meanfield.studies.sizing`)."""
    from ..studies.sizing import fit_size

    targets = [args.values] if args.values is not None else args.target
    given = {key: getattr(args, key) for key in ("loss", "kappa", "epsilon", "running", "l2", "l1", "max_iter")}
    return fit_size(args.config, overrides, params=args.param, targets=targets, inputs=args.input,
                    given={**given, "observables": args.observable}, **where)

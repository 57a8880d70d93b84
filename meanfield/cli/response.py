"""``meanfield response``: observables' values, influence functions and sensitivities; a causal
run's retrieval profile (``--retrieval``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Options, Subparsers, add_common
from .terminal import echo
from .values import number_list

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("response", help="observables' values, influence functions (the adjoint), predicted "
                              "fluctuations n_var and sensitivities to model parameters")
    p.add_argument("config", help="TOML config (no atoms)")
    p.add_argument("--observable", action="append", metavar="[NAME=]EXPR",
                   help="an observable phi, an expression in x, y, z such as 'z' or 'cos2=x**2 - y**2'; repeatable "
                        "(required without --retrieval; with it, the last token's psi of a pair)")
    p.add_argument("--at", type=number_list(float, "number"), required=True, metavar="T1,T2,...",
                   help="times in [0, time.t_final] of the values <phi, rho(t)>")
    p.add_argument("--wrt", action="append", default=[], metavar="PARAMETER",
                   help="a model parameter by its config path, e.g. model.beta, model.Q[0][1], "
                        "model.heads[1].weight, model.layers[0].beta: adds the column d_value_d_PARAMETER; repeatable")
    p.add_argument("--retrieval", action="store_true",
                   help="a causal run's retrieval profile R(t; s0) of the last position against every source "
                        "position: retrieval.csv and retrieval.png (default directory runs/<name>-retrieval)")
    p.add_argument("--modes", type=number_list(int, "integer"), metavar="N1,N2,...",
                   help="with --retrieval on S^1: Fourier modes n, psi = e^{-in theta}, phi = e^{in theta} "
                        "(default 1)")
    p.add_argument("--codewords", type=int, metavar="M",
                   help="with --retrieval on S^1: add DGR's retrieval score for M codewords (mode 0)")
    p.add_argument("--source", action="append", default=[], metavar="EXPR",
                   help="with --retrieval: the source observable phi of the pair whose psi is the --observable "
                        "of the same rank; repeatable (S^1 or S^2)")
    add_common(p, "output directory (default: runs/<name>-response, runs/<name>-retrieval with --retrieval)")
    p.set_defaults(handler=main, sizer=size)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..config import ConfigError

    if args.retrieval:
        from ..studies.retrieval import retrieval

        if args.wrt:
            raise ConfigError("--wrt: not with --retrieval (sensitivities are response.csv's)")
        found = retrieval(args.config, args.at, modes=args.modes or (), codewords=args.codewords,
                          observables=args.observable or (), sources=args.source, **options.keywords())
        echo(f"results: {found.path}/retrieval.csv, {found.path}/retrieval.png")
        return
    from ..studies.response import response

    for option in ("modes", "codewords"):
        if getattr(args, option) is not None:
            raise ConfigError(f"--{option}: only with --retrieval")
    if args.source:
        raise ConfigError("--source: only with --retrieval")
    result = response(args.config, args.observable or [], args.at, wrt=args.wrt, **options.keywords())
    echo(f"results: {result.path}/response.csv, {result.path}/influence.nc")


def size(args: argparse.Namespace, overrides: list[str], where: dict[str, Any]) -> JobSize:
    """The job of this command line as ``meanfield check response ...`` sizes it (``where``: ``out``,
    ``ranks``, ``cores``; :mod:`meanfield.studies.sizing`)."""
    from ..config import ConfigError
    from ..studies.sizing import response_size

    if args.retrieval:
        raise ConfigError("--retrieval: check sizes the response study, not the retrieval profile")
    return response_size(args.config, overrides, **where)

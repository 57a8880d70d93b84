"""Command line: parses arguments and calls the Python API, nothing more.

    meanfield run [CONFIG] [--out DIR] [--overwrite] [--set section.key=value ...] [--quiet]
    meanfield resume RUN_DIR [--t-final T] [--set section.key=value ...] [--quiet]
    meanfield particles CONFIG --n N [--seed S] [--out DIR] [--overwrite] [--set ...] [--quiet]
    meanfield validate CONFIG --n 1000,4000 [--seeds 4] [--out DIR] [--pde RUN_DIR [--force]] [--overwrite] [--quiet]
    meanfield response CONFIG --observable [NAME=]EXPR [--observable ...] --at T1,T2,... [--wrt model.beta ...]
                       [--out DIR] [--set ...] [--overwrite] [--quiet]
    meanfield response CONFIG --retrieval --at T1,... [--modes 1,2,3] [--codewords M]
                       [--observable PSI --source PHI ...] [--out DIR] [--set ...] [--overwrite] [--quiet]
    meanfield convergence CONFIG --levels 3:6 [--dt-ladder] [--reference exact|finest|RUN_DIR] [--out DIR]
    meanfield convergence CONFIG --slices 8,16,32 [--reference finest|RUN_DIR] [--out DIR]
                          [--overwrite] [--quiet]
    meanfield clusters RUN_DIR [--out DIR] [--threshold RHO] [--prominence P] [--factors 2,5,...] [--no-plots]
                       [--overwrite] [--quiet]
    meanfield longtime CONFIG [--betas 4,6,9] [--n N] [--t-final T] [--run RUN_DIR] [--delta D] [--out DIR]
                       [--no-plots] [--overwrite] [--quiet]
    meanfield sweep CONFIG --grid section.key=v1,v2,... [--grid ...] [--seeds N] [--draws N] [--particles [--n N]]
                    [--out DIR] [--array-index I] [--dry-run] [--set ...] [--overwrite] [--quiet]
    meanfield collect DIR... -o TABLE.csv|TABLE.nc [--final] [--densities] [--ensemble KEY [--plot FILE]]
                      [--overwrite] [--quiet]
    meanfield compare RUN_A RUN_B [-o TABLE.csv] [--overwrite] [--quiet]
    meanfield check [CONFIG] [--out DIR] [--ranks N] [--set section.key=value ...]
    meanfield plot RUN_DIR [--out DIR] [--format png|pdf|svg] [--no-movie] [--log|--linear] [--times T1,T2,...]
                   [--vmin V] [--vmax V] [--centre LON,LAT] [--fps F] [--frames] [--overwrite] [--quiet]
    meanfield mesh S2 --level L -o FILE  |  meanfield mesh S1 --cells N -o FILE  [--overwrite] [--quiet]
    meanfield info [RUN_DIR | SWEEP_DIR | STUDY_DIR] [--json]

Each subcommand is one module of this package, its parser (``add_parser``) beside its action
(``main``); the arguments most of them share (``--out``, ``--set``, ``--quiet``, ``--overwrite``,
``--no-memory-check``) are read once into :class:`~meanfield.cli.options.Options`, which every
action receives.  :mod:`~meanfield.cli.program` puts the parser together and turns exceptions into
exit codes.  An action imports the Python API when it runs, so that ``meanfield --help`` stays fast.

Bad arguments are refused as all bad input: one line on standard error naming the subcommand and
the argument (``error: meanfield run: unrecognized arguments: --bogus``), exit 2.

Every command that writes takes ``--overwrite`` (replace its own earlier results; without it
they are refused) and ``--quiet`` (no progress, log or summary on the terminal), except
``resume``, which continues its run and replaces nothing.  Default output folders are named
after the config (:mod:`meanfield.rundir.names`).

run, resume, particles, validate, response, convergence, sweep and mesh estimate the memory per rank
before building anything and refuse a job that does not fit in the memory available
(exit 2); ``--no-memory-check`` (or ``MEANFIELD_MEMORY_CHECK=off``) runs it anyway.

The same command works serially and under ``mpirun -n P``; only rank 0 prints.  Exit codes:
0 done; 1 the run failed (recorded in its metadata.json); 2 bad input (one line on stderr
naming the field, nothing written); 3 stopped at ``time.wall_limit`` after a checkpoint;
128 + n stopped by signal n (SIGTERM: 143, SIGINT: 130, SIGUSR1: 138) after a checkpoint;
141 (128 + SIGPIPE) the reader of standard output went away (``meanfield info RUN | head -4``):
the command stops quietly, as command-line tools do, and nothing is recorded as failed.
"""

from .program import build_parser, main

__all__ = ["build_parser", "main"]

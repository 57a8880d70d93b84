"""Convergence studies: a ladder of runs, errors of the density and observables, observed orders.

A ladder runs one config at nested mesh levels (S^2: icosphere level L; S^1: 2**L
segments), or at one mesh with the fixed step ``time.dt / 2**L`` (``axis = "dt"``), or, for a
causal run, with ``positions.slices = M`` for each M given (``axis = "slices"``).  Each
run uses all ranks and writes a normal run directory ``OUT/level<L>``; the errors are then
computed on rank 0 from the run directories (global cell order, so any rank count gives the
same numbers).

Modules: :mod:`.ladder` (levels, nested transfer, running the ladder), :mod:`.errors`
(references, norms, observed orders), :mod:`.table` (convergence.csv and the printed
table), :mod:`.plots` and :mod:`.study` (the whole study behind ``meanfield convergence``).
"""

from .errors import ConvergenceError, Row, error_rows
from .ladder import AXES, Ladder, coarsen, level_of, mesh_width, parse_levels, parse_slices, run_ladder
from .study import convergence_study
from .table import final_rows, format_table, read_csv, write_csv

__all__ = [
    "AXES",
    "ConvergenceError",
    "Ladder",
    "Row",
    "coarsen",
    "convergence_study",
    "error_rows",
    "final_rows",
    "format_table",
    "level_of",
    "mesh_width",
    "parse_levels",
    "parse_slices",
    "read_csv",
    "run_ladder",
    "write_csv",
]

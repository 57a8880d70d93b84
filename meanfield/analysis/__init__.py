"""Analyses: what is computed from runs that have ended, never inside a run's time loop.

Everything here reads run directories (through :func:`meanfield.load_run`) or arrays a caller
passes in, and writes its tables and pictures beside the run or into a folder of its own:

* :mod:`.clusters`: clusters at the density level (peaks and basins of PDE densities and of
  token densities), their tracking, crossing times and comparison (``meanfield clusters``);
* :mod:`.longtime`: clusters of weighted point sets on S^1 (tokens or atoms), their merges and
  metastable states, and the comparison of two such histories;
* :mod:`.diagnostics`: diagnostics.csv and inner_products.png of a particle run;
* :mod:`.metrics`: distances between token sets and densities (moments, energy, MMD, W1);
* :mod:`.collect`: many runs in one table (``meanfield collect``).

Analyses launch no runs (that is :mod:`meanfield.studies`) and solve no equations of their own
(reference solutions are in :mod:`meanfield.references`).  Serial and numpy/scipy only.
"""

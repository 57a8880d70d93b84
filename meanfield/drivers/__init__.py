"""Drivers: what starts and continues runs, on one launch path.

:mod:`.pde` (the PDE run) and :mod:`.particles` (the n-token run) build a simulation from the
problem and hand it to :mod:`.launch`, which opens the run directory and drives the engine;
:mod:`.resume` continues a run from its checkpoint; :mod:`.planning` says what a config would
do without running it (``meanfield check``).
"""

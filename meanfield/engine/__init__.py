"""The loop engine: the run controller, its handlers, signals, progress and callbacks.

:mod:`.controller` drives any :class:`~.simulation.Simulation` (PDE or particles) through its
output times, handles signals (:mod:`.signals`) and the wall limit, and calls the run's
handlers when they are due (:mod:`.handlers`: output files, log and progress (:mod:`.progress`),
callbacks (:mod:`.callbacks`), checkpoints, status).  Nothing here knows meshes or models:
simulations bring their own state, drivers their output files.
"""

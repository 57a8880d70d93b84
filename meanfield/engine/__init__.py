"""The loop engine: the run controller, its signals, progress and callbacks.

:mod:`.controller` drives any :class:`~.simulation.Simulation` (PDE or particles) through its
output times, handles signals (:mod:`.signals`) and the wall limit, and reports progress
(:mod:`.progress`).  Nothing here knows meshes or models: simulations bring their own state.
"""

"""Running simulations safely: the run controller, run directories, checkpoints and results.

:mod:`.controller` drives any :class:`~.simulation.Simulation` (PDE or particles) through its
output times; :mod:`.writers`, :mod:`.netcdf` (run.nc) and :mod:`.paraview` (XDMF) write
outputs; :mod:`.checkpoint` saves and restores whole states; :mod:`.directory` keeps run
directories safe (locks, overwrites that can be undone); :mod:`.session` starts and continues
runs; :mod:`.results` reads runs back; :mod:`.grid` names the points of a sweep's grid.
Nothing here knows meshes or models: simulations bring their own state.
"""

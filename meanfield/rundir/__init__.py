"""The run directory as a format: its layout, files, checkpoints, recovery and reading back.

:mod:`.layout` names the files; :mod:`.directory` keeps run directories safe (locks, overwrites
that can be undone, status); :mod:`.writers`, :mod:`.netcdf` (run.nc) and :mod:`.paraview`
(XDMF) write outputs; :mod:`.checkpoint` saves and restores whole states; :mod:`.recovery`
finds where a damaged run can go on from; :mod:`.results` reads runs back, each with its
:mod:`.header` (what the run says about itself, typed, read once); :mod:`.sweeps` names and finds
the points of a sweep directory.  Nothing here knows models: drivers hand it what to write.  Of
meanfield it imports only the record of point masses (:mod:`meanfield.point_masses`), the
spheres' descriptors (:mod:`meanfield.spheres`) and small helpers below every model (versions,
wording, sizes, MPI and thread plumbing).
"""

"""Reference solutions: what a run is checked against, computed without a mesh or a run directory.

* :mod:`.exact`: closed forms (solid-body rotation, the uniform density, the linear growth of a
  harmonic perturbation, the push-forward of the feed-forward flow);
* :mod:`.trajectories`: many characteristics at once, each with its own DOP853 step;
* :mod:`.spectral_circle`: the Fourier pseudo-spectral solution on S^1 (formation of clusters);
* :mod:`.lagrangian_circle`: quantile tokens moved by the exact S^1 field (long times, merges);
* :mod:`.lagrangian_sphere`: Fibonacci tokens on S^2 that coalesce once a cluster has collapsed
  (long times, merges).

Serial and numpy/scipy only; they read a :class:`~meanfield.Problem` or plain parameters.
"""

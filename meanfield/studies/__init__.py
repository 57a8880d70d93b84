"""Studies: drivers that launch runs and put their results side by side.

* :mod:`.sweep`: one run per point of a grid of config values (``meanfield sweep``);
* :mod:`.convergence`: refinement ladders and observed orders (``meanfield convergence``);
* :mod:`.validation`: particle systems against the PDE as n grows (``meanfield validate``);
* :mod:`.response`: observables' values, influence functions, n_var and parameter
  derivatives through the adjoint of one PDE run (``meanfield response``);
* :mod:`.retrieval`: the retrieval profile of a causal run, how much the last position
  remembers each source position (``meanfield response --retrieval``);
* :mod:`.longtime`: the Lagrangian reference and hybrid runs, merge tables against beta
  (``meanfield longtime``).

Each study runs ordinary run directories (:func:`meanfield.run`, :func:`meanfield.run_particles`)
and reads them back through the analyses of :mod:`meanfield.analysis`; none of them is part of a
run's time loop.
"""

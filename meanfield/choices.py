"""The names and defaults a config chooses between, in a module that imports nothing but the spheres' descriptors.

The configuration schema (:mod:`meanfield.config`) checks values against these names without
importing the meshes, schemes, evaluators or time stepper that implement them; those modules
take their names and defaults from here, so the two always agree.
"""

from __future__ import annotations

from .spheres import SPHERES as SPHERE_DESCRIPTORS

#: Sphere name -> ambient dimension d (``mesh.sphere``; :mod:`meanfield.spheres` has the descriptors).
SPHERES: dict[str, int] = {name: sphere.d for name, sphere in sorted(SPHERE_DESCRIPTORS.items())}
#: ``scheme.kind`` -> the scheme's description, the first one the default
#: (:data:`meanfield.discretisation.registry.SCHEMES` holds the classes).
SCHEME_DESCRIPTIONS: dict[str, str] = {"fv": "first-order finite volumes", "dg1": "second-order DG on P2 cells"}
#: The nonlocal field's evaluation methods (``nonlocal.method``).
FIELD_METHODS: tuple[str, ...] = ("direct", "fast", "auto")
#: Default accuracy of the fast field (max |X - X_exact| / max |X|).  On the default clustering
#: case (``benchmarks/bench_tolerance.py``, t = 1) it changes the density by at most 5e-7 of its
#: maximum: about four decades below the finite-volume (levels 4-6) and DG1 (levels 4-5)
#: discretisation errors, and 30-60 times below the field's own error from the schemes'
#: source quadrature at the finest of those levels.
FIELD_TOL = 1e-6
#: Default tolerance of the adaptive step's error controller (``time.tol``).
STEP_TOL = 1e-3

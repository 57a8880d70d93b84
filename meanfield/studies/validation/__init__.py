"""Mean-field validation: particle systems against the PDE (``meanfield validate``).

Metrics (:mod:`meanfield.analysis.metrics`), the comparison with a PDE run (:mod:`.compare`), the study driver
(:mod:`.study`) and its plots (:mod:`.plots`).  Points are located in mesh cells with
:class:`meanfield.mesh.CellLocator`.  Importing this package does not import dolfinx;
running the PDE does.
"""

from .compare import PDEReference
from .study import ValidationResult, fit_slope, validate

__all__ = ["PDEReference", "ValidationResult", "fit_slope", "validate"]

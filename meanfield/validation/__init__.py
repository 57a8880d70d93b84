"""Mean-field validation: particle systems against the PDE (``meanfield validate``).

Metrics (:mod:`.metrics`), the point-in-cell locator (:mod:`.locate`), the comparison with a
PDE run (:mod:`.compare`), the study driver (:mod:`.study`) and its plots (:mod:`.plots`).
Importing this package does not import dolfinx; running the PDE does.
"""

from .compare import PDEReference
from .locate import CellLocator
from .study import ValidationResult, fit_slope, validate

__all__ = ["CellLocator", "PDEReference", "ValidationResult", "fit_slope", "validate"]

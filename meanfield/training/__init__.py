"""Training at the density level: fitting a mean-field transformer's weights to measures.

- :mod:`.parameters`: the free parameters, config paths expanded to numbers;
- :mod:`.losses`: losses between the solution at T and a target, with first variations;
- :mod:`.targets`: targets from expressions, runs, token files or numbers;
- :mod:`.objective`: the loss and its gradient in memory (one forward run and one adjoint
  sweep per pair);
- :mod:`.fit`: the optimiser and its folder (``meanfield fit``).
"""

from __future__ import annotations

from .losses import LOSSES, MMD, Cells, CircleW2, Loss, Measure, ObservableErrors, Sinkhorn, Target
from .objective import Evaluation, Objective, Pair, make_loss, make_pairs
from .parameters import Parameter, Parameters

__all__ = ["LOSSES", "MMD", "Cells", "CircleW2", "Evaluation", "Loss", "Measure", "Objective", "ObservableErrors",
           "Pair", "Parameter", "Parameters", "Sinkhorn", "Target", "make_loss", "make_pairs"]

"""Studies built from runs: convergence (refinement ladders), mean-field validation
(particles against the PDE) and, where present, cluster analysis.

Each study runs or reads ordinary run directories and writes its own tables and plots;
none of them is part of a run's time loop.
"""

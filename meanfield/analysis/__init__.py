"""Analyses: what is computed from runs that have ended, never inside a run's time loop.

Everything here reads run directories (through :func:`meanfield.load_run`) or arrays a caller
passes in, and writes its tables and pictures beside the run or into a folder of its own:

* :mod:`.clusters`: clusters at the density level (peaks and basins of PDE densities and of
  token densities), their tracking, crossing times and comparison (``meanfield clusters``);
* :mod:`.longtime`: clusters of weighted point sets on S^1 (tokens or atoms), their merges and
  metastable states, and the comparison of two such histories;
* :mod:`.events`: the events that change a set of clusters;
* :mod:`.diagnostics`: diagnostics.csv and inner_products.png of a particle run;
* :mod:`.metrics`: distances between token sets and densities (moments, energy, MMD, W1);
* :mod:`.collect`: many runs in one table (``meanfield collect``); :mod:`.phase`: their cluster
  counts and formation times (``--clusters``).

Analyses launch no runs (that is :mod:`meanfield.studies`) and solve no equations of their own
(reference solutions are in :mod:`meanfield.references`).  Serial and numpy/scipy only.

Clusters
--------
A cluster is mass that the dynamics has gathered; the data decide which variant finds it:

* *basins* (:mod:`.clusters`, :class:`~.clusters.BasinHistory`): significant peaks of a
  density on a mesh (a PDE state, or a kernel estimate of tokens) with their watershed
  regions, on S^1 and S^2;
* *point-set groups* (:mod:`.longtime`, :class:`~.longtime.PointSetHistory`): single-linkage
  groups of dense weighted points on S^1 (reference tokens, the atoms of hybrid runs), for
  clusters far narrower than any mesh;
* *links* (:mod:`.diagnostics`, rule ``"links"``): connected components of the graph of
  tokens closer than a chord, in any dimension.

Both histories record the same :class:`~.events.Event` (births, splits, merges, deaths), and a
merge has one definition and one time in both (:mod:`meanfield.merging`).
"""

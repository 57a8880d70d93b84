"""Small S^1 cases several test files run: two von Mises bumps on 64 cells.

:func:`two_bumps` gives the mesh, model and initial density; a test appends the sections it
needs.  :data:`COLLAPSING` is the hybrid case: two tight clusters that collapse onto a few cells
within t = 0.5 and are captured as atoms with :data:`CAPTURE` (the density stays:
``absorb_mass = 0``).  :func:`hybrid_case` is a run that starts with two atoms, for its files and
pictures."""

from __future__ import annotations


def two_bumps(beta: float, kappa: float) -> str:
    """``[mesh]``, ``[model]`` and ``[initial]`` of the case (name ``case``): 64 cells, softmax
    attention at ``beta``, two vMF bumps of concentration ``kappa`` at theta = 0 and 2.21."""
    return f"""name = "case"
[mesh]
sphere = "S1"
resolution = 64
[model]
beta = {beta!r}
[initial]
kind = "vmf"
centers = [[1.0, 0.0], [-0.6, 0.8]]
kappas = [{kappa!r}, {kappa!r}]
"""


#: beta = 9, kappa = 100: the clusters collapse within t = 0.5.
COLLAPSING = two_bumps(9.0, 100.0)
#: Capture into atoms as soon as a core is resolved, keeping the density; no ParaView files.
CAPTURE = """[atoms]
capture = true
min_height = 5.0
core_fraction = 0.5
core_level = 0.3
absorb_mass = 0.0
lipschitz_step = 0.25
[output]
xdmf = false
"""


def hybrid_case(resolution: int, t_final: float, outputs: int) -> str:
    """The ParaView/pictures hybrid case (name ``hybrid``): one vMF bump (kappa 4) at theta = pi
    under softmax attention, beta 9, with two atoms given at the start (masses 0.3 and 0.25,
    0.3 rad apart) that merge (``merge_distance = 0.02``)."""
    return f"""name = "hybrid"
[mesh]
sphere = "S1"
resolution = {resolution}
[model]
beta = 9.0
[initial]
kind = "vmf"
centers = [[-1.0, 0.0]]
kappas = [4.0]
[time]
t_final = {t_final!r}
outputs = {outputs}
[atoms]
capture = true
merge_distance = 0.02
initial = [[0.3, 1.0, 0.0], [0.25, 0.955336489125606, 0.29552020666133955]]
"""

"""view-in-paraview.py: a ParaView Python script written beside a run's ParaView files.

ParaView's Glyph filter places glyphs by default on a sample of the points ("Uniform Spatial
Distribution"), which leaves out atoms close to others; the script sets up what a user would
otherwise click together: the density coloured by ``density`` (a causal run: the last token
position's ``density_s<s>``) on one colour scale for every
output, from 0 (DG1 vertex values, which dip below 0 near steep fronts, do not set it) to the
largest value over the outputs (not the last output's: a hybrid run's residual density beside
its atoms is ~1e-38), the atoms (when the run has
atoms.pvd) as red spheres of diameter ``ATOM_SCALE * sqrt(mass)`` on every point ("All
Points"), the animation on the outputs' times.  Run it as

* ``paraview --script=RUN/view-in-paraview.py`` (the GUI);
* ``pvbatch RUN/view-in-paraview.py picture.png``: a picture of the last output, no GUI
  (``xvfb-run pvbatch ...`` where there is no display).

The script finds the run from its own location (``__file__``), else from the path the run
had when it was written.
"""

from __future__ import annotations

from pathlib import Path

#: Glyph diameter of an atom of mass 1 (the sphere has radius 1).
ATOM_SCALE = 0.25

_TEMPLATE = '''"""Open this meanfield run in ParaView: the density over time and the atoms as spheres.

    paraview --script=view-in-paraview.py       the GUI
    pvbatch view-in-paraview.py picture.png     a picture of the last output (no GUI;
                                                xvfb-run pvbatch ... where there is no display)

Written by meanfield.  Atoms (runs with atoms.pvd) are red spheres of diameter
@SCALE@ * sqrt(mass), drawn on every atom (Glyph mode "All Points").
"""
import os
import sys

from paraview.simple import (Calculator, ColorBy, GetActiveViewOrCreate, GetAnimationScene,
                             GetColorTransferFunction, GetOpacityTransferFunction, Glyph, OpenDataFile,
                             Render, SaveScreenshot, Show)

RUN = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else @RUN@
DENSITY, CENTRE = @DENSITY@, @CENTRE@


def density_array(source, centre):
    """The array to colour by: ``density``, or for a causal run (one array per token position,
    ``density_s<s>``) the last position's."""
    names = list((source.CellData if centre == "CELLS" else source.PointData).keys())
    return "density" if "density" in names or not names else sorted(names)[-1]


def density_range(source, centre, name):
    """The density's range over every output, from 0 up: DG1 vertex values dip below 0 near
    steep fronts and a hybrid run's last density is a residual of ~1e-38 beside its atoms, so
    neither the last output nor the vertex values' minimum make the colour scale."""
    steps = source.TimestepValues  # a property listing the times (a bare number for one output)
    steps = [float(t) for t in steps] if hasattr(steps, "__len__") else [float(steps)] if steps is not None else []
    low, high = float("inf"), float("-inf")
    for t in steps or [None]:
        source.UpdatePipeline() if t is None else source.UpdatePipeline(t)
        arrays = source.CellData if centre == "CELLS" else source.PointData
        a, b = arrays[name].GetRange()
        low, high = min(low, a), max(high, b)
    low = max(low, 0.0)
    return low, high if high > low else low + 1.0


view = GetActiveViewOrCreate("RenderView")
density = OpenDataFile(os.path.join(RUN, DENSITY), registrationName=DENSITY)
shown = Show(density, view)
ARRAY = density_array(density, CENTRE)
ColorBy(shown, (CENTRE, ARRAY))
RANGE = density_range(density, CENTRE, ARRAY)
colours = GetColorTransferFunction(ARRAY)
colours.AutomaticRescaleRangeMode = "Never"  # one scale for every output
colours.RescaleTransferFunction(*RANGE)
GetOpacityTransferFunction(ARRAY).RescaleTransferFunction(*RANGE)
shown.SetScalarBarVisibility(view, True)
shown.LineWidth = 3.0  # S^1: the circle's cells are lines
if os.path.exists(os.path.join(RUN, "atoms.pvd")):
    atoms = OpenDataFile(os.path.join(RUN, "atoms.pvd"), registrationName="atoms.pvd")
    size = Calculator(registrationName="atom size", Input=atoms, ResultArrayName="size", Function="sqrt(mass)")
    glyphs = Glyph(registrationName="atoms", Input=size, GlyphType="Sphere")
    glyphs.ScaleArray = ["POINTS", "size"]
    glyphs.ScaleFactor = @SCALE@
    glyphs.GlyphMode = "All Points"
    drawn = Show(glyphs, view)
    drawn.ColorArrayName = ["POINTS", ""]
    drawn.AmbientColor = drawn.DiffuseColor = [1.0, 0.0, 0.0]
scene = GetAnimationScene()
scene.UpdateAnimationUsingDataTimeSteps()
view.ResetCamera()
if len(sys.argv) > 1 and sys.argv[-1].lower().endswith((".png", ".jpg", ".jpeg", ".tif", ".tiff")):
    scene.AnimationTime = density.TimestepValues[-1]
    SaveScreenshot(sys.argv[-1], view, ImageResolution=[800, 800])
else:
    Render(view)
'''


def view_script(run_dir: Path, density: str, centre: str) -> str:
    """The text of view-in-paraview.py for the run at ``run_dir``.

    Parameters
    ----------
    run_dir
        The run directory (recorded, resolved, for a ParaView that gives the script no ``__file__``).
    density
        The file of the density to show (density.xdmf, or density-dg1.xdmf for DG1).
    centre
        Where ``density`` lives in that file: ``"CELLS"`` or ``"POINTS"``.
    """
    text = _TEMPLATE
    for key, value in (("@RUN@", repr(str(Path(run_dir).resolve()))), ("@DENSITY@", repr(density)),
                       ("@CENTRE@", repr(centre)), ("@SCALE@", repr(ATOM_SCALE))):
        text = text.replace(key, value)
    return text

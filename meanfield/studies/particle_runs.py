"""Particle runs with their diagnostics: :func:`meanfield.run_particles` and :func:`meanfield.resume`.

The drivers (:mod:`meanfield.drivers`) sit below the analyses (docs/architecture.rst), so they
take a run's analysis as handlers (``analysis``); these are the drivers' functions with a
particle run's diagnostics (:class:`meanfield.analysis.diagnostics.Diagnostics`: diagnostics.csv
and inner_products.png, once the outputs are written, unless ``output.diagnostics = false``), as
the Python API and the CLI (``meanfield particles``, ``meanfield resume``) call them, so that
both leave the same run directory.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..analysis.diagnostics import Diagnostics
from ..drivers import particles
from ..drivers import resume as resuming
from ..rundir.results import ParticleRunResult, PDERunResult


@functools.wraps(particles.run_particles)
def run_particles(config: Any = None, **keywords: Any) -> ParticleRunResult:
    return particles.run_particles(config, analysis=[Diagnostics()], **keywords)


@functools.wraps(resuming.resume)
def resume(path: str | Path, **keywords: Any) -> PDERunResult | ParticleRunResult:
    return resuming.resume(path, analysis=[Diagnostics()], **keywords)

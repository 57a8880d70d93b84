"""The spatial schemes by name: every place that chooses or describes a scheme asks here.

A scheme class carries its config name (``scheme.kind``), description, formal order, whether
its state has vertex values, and the ``[scheme]`` keys its constructor takes
(:class:`~.base.SpatialScheme`).  Importing this module does not import dolfinx.
"""

from __future__ import annotations

from typing import Any

from .base import SpatialScheme
from .dg1 import DG1Scheme
from .fv import FiniteVolumeScheme

#: ``scheme.kind`` -> scheme class, the first one the default.
SCHEMES: dict[str, type[SpatialScheme]] = {cls.name: cls for cls in (FiniteVolumeScheme, DG1Scheme)}


def scheme_class(kind: str) -> type[SpatialScheme]:
    """The scheme class of ``scheme.kind`` (KeyError for an unknown kind: configs are checked)."""
    return SCHEMES[kind]


def scheme_options(kind: str, settings: Any) -> dict[str, Any]:
    """The constructor keywords of the scheme ``kind`` from ``settings`` (a ``[scheme]`` view)."""
    return {key: getattr(settings, key) for key in scheme_class(kind).options}

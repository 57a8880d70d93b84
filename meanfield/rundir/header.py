"""What a run says about itself, read once: :class:`RunHeader`, from its config and metadata.json.

The readers of a run (:mod:`.results`, the run file's attributes in :mod:`.netcdf`, ``meanfield
info``, the pictures, ``meanfield collect``, the ensembles, the comparisons and the studies) take
this typed header instead of walking the config's nested tables each on its own.  The writers
build the same header from the config they write (:meth:`RunHeader.of`), so run.nc's attributes
say the same whether written by a run or rebuilt from its snapshots.

The config is the resolved one a run directory holds (config.toml: every key present); a
missing key reads as the schema's default, so the header also takes a partial config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..spheres import DEFAULT_SPHERE, Sphere, sphere_named, sphere_of_dimension


@dataclass(frozen=True)
class OwnObservable:
    """One ``[[output.observables]]`` entry: an observable of one's own.

    Attributes
    ----------
    name, expression
        Its column name and the expression evaluated.
    every
        Its model-time cadence; ``None``: at every output.
    """

    name: str
    expression: str
    every: float | None = None


@dataclass(frozen=True)
class MeshTable:
    """The ``[mesh]`` table: the mesh a run's config describes (a particle run's too, which the
    cluster analysis of its tokens meshes).

    Attributes
    ----------
    sphere
        ``mesh.sphere``'s descriptor (:mod:`meanfield.spheres`).
    resolution, file
        ``mesh.resolution`` and ``mesh.file`` (``None`` where not given).
    """

    sphere: Sphere
    resolution: int | None = None
    file: str | None = None


@dataclass(frozen=True)
class RunHeader:
    """A run's facts, typed: what every reader of a run asks of its config and metadata.json.

    Attributes
    ----------
    run_type
        ``"pde"`` or ``"particles"`` (metadata.json's ``kind``).
    name
        The config's ``name``.
    sphere
        The descriptor of the sphere the run's density or tokens live on (:mod:`meanfield.spheres`):
        the mesh's, or that of a particle run's ``particles.d``; ``None`` for tokens in d > 3.
    d
        The ambient dimension: the mesh's, or a particle run's ``particles.d``.
    scheme
        A PDE run's ``scheme.kind``; ``None`` for a particle run.
    mask
        ``model.mask``: ``"none"`` or ``"causal"``.
    slices
        ``positions.slices`` as the config gives it (``None``: the default, or no mask).
    tokens
        A particle run's ``particles.n``; else ``None``.
    prompts
        A particle run's ``particles.prompts`` where the config has it; else ``None``.
    observables
        The run's own observables (``[[output.observables]]``), in the config's order.
    layer_ends
        The end time ``t_end`` of each ``[[model.layers]]`` entry, in order (empty for one layer).
    t_final, dt
        ``time.t_final`` and the fixed step ``time.dt`` (``None``: adaptive).
    diagnostics
        ``output.diagnostics`` (a particle run's cluster diagnostics).
    mesh
        The ``[mesh]`` table (:class:`MeshTable`).
    model
        The ``[model]`` table as written (its parameters for titles and the run file's attributes).
    config, metadata
        The config (nested dict) and metadata.json themselves, for what is not a fact above
        (a sweep's parameters, a problem rebuilt from the run).
    """

    run_type: str
    name: str
    sphere: Sphere | None
    d: int
    scheme: str | None
    mask: str
    slices: int | None
    tokens: int | None
    prompts: int | None
    observables: tuple[OwnObservable, ...]
    layer_ends: tuple[float, ...]
    t_final: float | None
    dt: float | None
    diagnostics: bool
    mesh: MeshTable
    model: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, run_type: str, config: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> RunHeader:
        """The header of a run of ``run_type`` with this config (nested mapping) and metadata.json."""
        mesh, model, time = config.get("mesh") or {}, config.get("model") or {}, config.get("time") or {}
        output, particles = config.get("output") or {}, config.get("particles") or {}
        meshed = MeshTable(sphere_named(str(mesh.get("sphere", DEFAULT_SPHERE.name))), mesh.get("resolution"),
                           mesh.get("file"))
        sphere: Sphere | None = meshed.sphere
        d = meshed.sphere.d
        if run_type == "particles" and particles.get("d"):
            d = int(particles["d"])
            sphere = sphere_of_dimension(d)
        return cls(
            run_type=run_type, name=str(config.get("name", "")), sphere=sphere, d=d,
            scheme=str((config.get("scheme") or {}).get("kind", "fv")) if run_type == "pde" else None,
            mask=str(model.get("mask", "none")), slices=(config.get("positions") or {}).get("slices"),
            tokens=particles.get("n") if run_type == "particles" else None,
            prompts=particles.get("prompts") if run_type == "particles" else None,
            observables=tuple(OwnObservable(str(e["name"]), str(e["expression"]), e.get("every"))
                              for e in output.get("observables") or []),
            layer_ends=tuple(float(layer["t_end"]) for layer in model.get("layers") or []),
            t_final=time.get("t_final"), dt=time.get("dt"), diagnostics=bool(output.get("diagnostics", True)),
            mesh=meshed,
            model=dict(model), config=dict(config), metadata=dict(metadata or {}))

    @classmethod
    def read(cls, config: Mapping[str, Any], metadata: Mapping[str, Any]) -> RunHeader:
        """The header of a run directory from its config and metadata.json (its ``kind``, ``"pde"`` if absent)."""
        return cls.of(str(metadata.get("kind") or "pde"), config, metadata)


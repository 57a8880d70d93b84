"""A run's header (meanfield.rundir.header): what its readers ask of its config and metadata.json,
typed and read once; the run file's attributes come from it."""

from __future__ import annotations

from meanfield.config import load_config
from meanfield.rundir.header import MeshTable, OwnObservable, RunHeader
from meanfield.rundir.netcdf import own_observable_attributes, run_attributes
from meanfield.spheres import DEFAULT_SPHERE, S1, S2


def test_a_resolved_pde_config():
    """The facts of a resolved causal DG1 config on S^1, with two layers and an observable of one's own."""
    config = load_config({"name": "h", "mesh": {"sphere": "S1", "resolution": 32}, "scheme": {"kind": "dg1"},
                          "model": {"mask": "causal", "layers": [{"t_end": 0.5}, {"t_end": 1.0}]},
                          "positions": {"slices": 4}, "time": {"t_final": 1.0, "dt": 0.01},
                          "output": {"observables": [{"name": "c", "expression": "x", "every": 0.5}]}}).data
    header = RunHeader.read(config, {"kind": "pde", "name": "run-h"})
    assert (header.run_type, header.name, header.sphere, header.d, header.scheme) == ("pde", "h", S1, 2, "dg1")
    assert (header.mask, header.slices, header.tokens, header.prompts) == ("causal", 4, None, None)
    assert header.mesh == MeshTable(S1, 32, None)
    assert header.layer_ends == (0.5, 1.0) and (header.t_final, header.dt) == (1.0, 0.01)
    assert header.observables == (OwnObservable("c", "x", 0.5),)
    assert header.metadata["name"] == "run-h" and header.config["mesh"]["resolution"] == 32
    attrs = run_attributes(header)
    assert (attrs["kind"], attrs["sphere"], attrs["scheme"], attrs["mask"]) == ("pde", "S1", "dg1", "causal")
    assert attrs["title"] == "meanfield PDE run h" and attrs["model_mask"] == "causal"
    assert own_observable_attributes(header)["c"]["expression"] == "x"


def test_tokens_live_on_their_own_sphere():
    """A particle run's sphere is that of ``particles.d`` (none above d = 3); its mesh table stays
    the config's, which the cluster analysis of its tokens meshes."""
    on_circle = RunHeader.of("particles", {"mesh": {"sphere": "S2", "resolution": 3}, "particles": {"n": 8, "d": 2}})
    assert (on_circle.sphere, on_circle.d, on_circle.tokens, on_circle.scheme) == (S1, 2, 8, None)
    assert on_circle.mesh == MeshTable(S2, 3, None)
    high = RunHeader.of("particles", {"particles": {"n": 8, "d": 5, "prompts": 3}})
    assert (high.sphere, high.d, high.prompts) == (None, 5, 3)
    assert "sphere" not in run_attributes(high) and run_attributes(high)["kind"] == "particles"


def test_a_partial_config_reads_as_the_defaults():
    """Missing tables read as the schema's defaults; a metadata.json without ``kind`` is a PDE run's."""
    header = RunHeader.read({}, {})
    assert (header.run_type, header.sphere, header.d, header.scheme, header.mask) == ("pde", DEFAULT_SPHERE,
                                                                                     DEFAULT_SPHERE.d, "fv", "none")
    assert header.observables == () and header.layer_ends == () and header.diagnostics

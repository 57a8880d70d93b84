"""A new mask registered from outside the package (docs: "Adding a variant").

A mask kind is one class (:class:`meanfield.masks.Mask`); its PDE component, its tokens'
component and its slices' pictures register under its name.  The mask below, ``prefix``, is
the causal mask under another name with the causal components registered for it, so a run
with it must be the causal run, computed through the registries alone: the config's choices
and checks, the PDE, the tokens (one run and a batch of prompts), the run files, the read-back
and ``meanfield info``.  The package is not edited.
"""

from __future__ import annotations

import numpy as np
import pytest

import meanfield
from meanfield.config import ConfigError, load_config
from meanfield.drivers.particles import build_particles
from meanfield.masks import Causal, mask_names, whole_measure
from meanfield.particles.positions import CausalTokenPositions, tokens_component
from meanfield.particles.prompts import prompt_batch
from meanfield.plotting.run_plots import CausalPictures, slice_pictures
from meanfield.positions import CausalPositions, pde_component
from meanfield.problem import Problem
from meanfield.rundir.info import format_description
from meanfield.rundir.results import RunReadError, describe


class Prefix(Causal):
    """The causal mask under another name."""

    name = "prefix"


pde_component("prefix")(CausalPositions)
tokens_component("prefix")(CausalTokenPositions)
slice_pictures("prefix")(CausalPictures)

CASE = {"mesh": {"sphere": "S1", "resolution": 16}, "model": {"beta": 3.0, "mask": "causal"},
        "positions": {"slices": 3, "decay": 0.5},
        "initial": {"kind": "expression", "expression": "1 + 0.5*(1 - s)*x + 0.5*s*y"},
        "particles": {"n": 12, "seed": 3}, "nonlocal": {"method": "direct"},
        "time": {"t_final": 0.1, "dt": 0.05, "outputs": 2}}


def _with(mask: str) -> dict:
    return {**CASE, "model": {**CASE["model"], "mask": mask}}


def test_registered_mask_is_a_config_choice_with_its_checks():
    assert "prefix" in mask_names()
    problem = Problem(load_config(_with("prefix")))
    assert problem.mask == Prefix(3, 0.5) and problem.initial().depends_on_position
    assert Problem(load_config({"model": {"mask": "prefix"}})).mask.slices == Causal.from_settings(
        load_config({"model": {"mask": "causal"}}).data["positions"]).slices  # the default slices
    with pytest.raises(ConfigError, match="atoms.capture"):
        load_config({**_with("prefix"), "atoms": {"capture": True}})


@pytest.mark.slow
def test_a_run_with_the_registered_mask_is_the_causal_run(tmp_path):
    ours = meanfield.run(_with("prefix"), out=tmp_path / "prefix", quiet=True)
    causal = meanfield.run(CASE, out=tmp_path / "causal", quiet=True)
    assert ours.mask == Prefix(3, 0.5) and ours.densities.shape == causal.densities.shape == (3, 3, 16)
    np.testing.assert_allclose(ours.densities, causal.densities, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(ours.positions, causal.positions)
    whole = whole_measure(ours)
    np.testing.assert_allclose(whole.densities, causal.densities.mean(axis=1), rtol=0, atol=1e-14)
    assert len(ours.position_dataframe()) == 3 * 3
    assert "M = 3 position slices" in format_description(describe(tmp_path / "prefix"))
    config = tmp_path / "prefix" / "config.toml"  # a run of a mask this process has not registered
    config.write_text(config.read_text().replace('mask = "prefix"', 'mask = "window"'))
    with pytest.raises(RunReadError, match="'window' is not a registered mask"):
        meanfield.load_run(tmp_path / "prefix")


def test_the_tokens_with_the_registered_mask_are_the_causal_tokens():
    ours, causal = build_particles(_with("prefix")), build_particles(CASE)
    np.testing.assert_array_equal(ours.x, causal.x)
    np.testing.assert_array_equal(ours.positions.s, causal.positions.s)
    np.testing.assert_allclose(ours.system.velocity(ours.x), causal.system.velocity(causal.x), rtol=0, atol=1e-14)
    batch, plain = prompt_batch(Problem(load_config(_with("prefix"))), 2), prompt_batch(Problem(load_config(CASE)), 2)
    np.testing.assert_array_equal(batch.initial(range(2)), plain.initial(range(2)))
    ours_layer, plain_layer = batch.layers(range(2))[0], plain.layers(range(2))[0]
    assert ours_layer.structure == plain_layer.structure and ours_layer.structure.masked
    np.testing.assert_array_equal(ours_layer.arrays["bias"], plain_layer.arrays["bias"])

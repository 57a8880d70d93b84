"""Causal runs as users run them: the config keys, their refusals, and the CLI.

The numerics of :mod:`meanfield.causal` are checked against exact facts in test_causal.py;
here the configuration (``[model] mask``, ``[positions] slices``, initial expressions in s)
and the run through ``meanfield run`` (outputs, resume, ranks).
"""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from helpers.cli import S1, refused

from meanfield.config import DEFAULT_SLICES, load_config
from meanfield.problem import Problem

CAUSAL = '[model]\nmask = "causal"\n'


@pytest.mark.parametrize("text, field", [
    (S1 + CAUSAL + "[positions]\nslices = 0\n", "positions.slices: must be an integer >= 1"),
    (S1 + CAUSAL + "[positions]\nslices = 2.5\n", "positions.slices: must be an integer >= 1"),
    (S1 + "[positions]\nslices = 4\n", "positions.slices: needs model.mask = 'causal'"),
    (S1 + CAUSAL + "[positions]\nslice = 4\n", "positions.slice: unknown key (did you mean 'slices'?)"),
    (S1 + '[model]\nmask = "decoder"\n', "model.mask: must be 'none'"),
    (S1 + '[initial]\nkind = "expression"\nexpression = "1 + s*x"\n', "initial.expression: uses the position s"),
    (S1 + CAUSAL + "[atoms]\ncapture = true\n", "atoms.capture: atoms are not supported with model.mask = 'causal'"),
    (S1 + CAUSAL + "[atoms]\ninitial = [[0.5, 1.0, 0.0]]\n", "atoms.initial: atoms are not supported"),
    (S1 + '[model]\nmask = "causal"\nvelocity = "rotation"\n', "model.mask: 'causal' needs model.velocity"),
    (S1 + CAUSAL + '[initial]\nkind = "expression"\nexpression = "1 + t*x"\n', "initial.expression: unknown name 't'"),
], ids=["zero", "fraction", "without-mask", "typo", "mask-value", "s-without-mask", "capture", "atoms",
        "rotation", "unknown-name"])
def test_refused_before_anything_is_written(tmp_path, capsys, text, field):
    refused(tmp_path, capsys, text, field)


def test_problem_has_mask_slices_positions_and_the_density_of_each_position():
    problem = Problem(load_config({"mesh": {"sphere": "S1", "resolution": 16}, "model": {"mask": "causal"},
                                   "positions": {"slices": 4},
                                   "initial": {"kind": "expression", "expression": "1 + s*x"}}))
    assert problem.causal and problem.mask == "causal" and problem.slices == 4
    assert np.allclose(problem.positions, [0.125, 0.375, 0.625, 0.875])
    points = np.array([[1.0, 0.0], [0.0, 1.0]])
    density = problem.initial()
    assert density.depends_on_position and np.allclose(density.at(points, 0.25), [1.25, 1.0])
    with pytest.raises(ValueError, match="depends on the position s"):
        density(points)


def test_defaults_without_mask_and_without_slices():
    plain = Problem(load_config({"mesh": {"sphere": "S1", "resolution": 16}}))
    assert plain.mask == "none" and not plain.causal and plain.slices is None and plain.positions is None
    assert "[positions]" not in plain.config.to_toml()
    causal = load_config({"mesh": {"sphere": "S1", "resolution": 16}, "model": {"mask": "causal"},
                          "initial": {"kind": "vmf", "centers": [[1.0, 0.0]]}})
    assert Problem(causal).slices == DEFAULT_SLICES
    again = Problem(load_config(tomllib.loads(causal.to_toml())))
    assert again.slices == DEFAULT_SLICES and not again.initial().depends_on_position

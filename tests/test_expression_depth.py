"""Expressions nested beyond what can be parsed or evaluated are bad input naming the field.

A sum of 30000 terms once ended as "the run failed: RecursionError" (exit 1) from inside
Python's parser; the 200-level limit keeps the checker and the evaluator (one Python frame per
level) far from the interpreter's recursion limit, whatever the caller's stack depth.
"""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.expression import MAX_DEPTH, ExpressionError, compile_expression


@pytest.mark.parametrize("terms", [300, 30000])
def test_long_chains_are_refused_naming_the_field(terms):
    with pytest.raises(ExpressionError, match=r"^initial\.expression: nests") as info:
        compile_expression(" + ".join(["x"] * terms))
    assert str(info.value).count("\n") == 0 and len(str(info.value)) < 200


def test_a_long_chain_within_the_limit_is_evaluated():
    terms = MAX_DEPTH - 10
    f = compile_expression(" + ".join(["x"] * terms))
    points = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    assert np.array_equal(f(points), terms * points[:, 0])


def test_other_fields_are_named():
    with pytest.raises(ExpressionError, match=r"^model\.layers\[0\]: nests"):
        compile_expression("+".join(["z"] * 500), field="model.layers[0]")

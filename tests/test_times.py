"""When two model times are the same (:mod:`meanfield.times`)."""

from __future__ import annotations

from meanfield.times import MATCH_TOL, TIME_TOL, same_time, time_tol


def test_a_time_reached_by_many_steps_is_the_output_time():
    """10^4 steps of 0.1, added one by one as a time loop adds them, miss t = 1000 by round-off
    (about 1.6e-10) and still land on it; a step short (0.1) or 1e-8 off does not."""
    reached = 0.0
    for _ in range(10_000):
        reached += 0.1
    assert reached != 1000.0
    assert same_time(reached, 1000.0)
    assert not same_time(1000.0 - 0.1, 1000.0) and not same_time(1000.0 + 1e-8, 1000.0)


def test_the_tolerance_is_absolute_below_one_and_relative_above():
    assert time_tol(0.0) == time_tol(0.5) == time_tol(-1.0) == TIME_TOL
    assert time_tol(1e6) == TIME_TOL * 1e6
    assert same_time(1e-13, 0.0) and not same_time(2e-12, 0.0)


def test_times_computed_apart_match_at_the_looser_strength():
    """Output times 0.3 * k against a grid built as a sum of spacings differ by more than
    TIME_TOL after many outputs, and match at MATCH_TOL."""
    spacing = 0.3
    grid = [0.0]
    for _ in range(100_000):
        grid.append(grid[-1] + spacing)
    apart = abs(grid[-1] - spacing * 100_000)
    assert apart > time_tol(spacing * 100_000)
    assert same_time(grid[-1], spacing * 100_000, MATCH_TOL)
    assert not same_time(grid[-1], spacing * 99_999, MATCH_TOL)

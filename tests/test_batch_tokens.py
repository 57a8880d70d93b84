"""The batched token engine: prompt b of a batch is the single-prompt particle run with seed + b."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.config import ConfigError, load_config
from meanfield.particles.batch import bytes_per_prompt, chunk_size, run_batch
from meanfield.particles.prompts import prompt_batch
from meanfield.problem import Problem
from tests.helpers.tokens import single_runs

RNG = np.random.default_rng(7)
D = 4


def _matrix(scale: float = 0.6) -> list[list[float]]:
    return (np.eye(D) + scale * RNG.standard_normal((D, D))).tolist()


HEADS = [{"Q": _matrix(), "K": _matrix(), "V": _matrix(), "weight": 0.7},
         {"Q": _matrix(), "K": _matrix(), "V": _matrix(), "weight": -0.4}]
FFN = {"W": (0.5 * RNG.standard_normal((D, 3))).tolist(), "A": RNG.standard_normal((3, D)).tolist(),
       "b": [0.1, -0.2, 0.3], "activation": "gelu"}


def _config(model: dict, n: int = 6, t_final: float = 1.0, positions: dict | None = None, **particles) -> dict:
    return {"name": "batch", "mesh": {"sphere": "S2", "resolution": 1}, "initial": {"kind": "uniform"},
            "model": model, "positions": positions or {},
            "particles": {"n": n, "d": D, "seed": 5, **particles}, "time": {"t_final": t_final, "outputs": 2}}


CASES = {
    "sa": {"beta": 3.0},
    "usa": {"beta": 1.5, "attention": "unnormalized"},
    "heads-ffn-layers": {"beta": 2.0, "heads": HEADS, "ffn": FFN,
                         "layers": [{"t_end": 0.4}, {"t_end": 1.0, "beta": 0.5, "attention": "unnormalized"}]},
    "causal-sa-alibi": {"beta": 2.0, "mask": "causal", "Q": _matrix(), "V": _matrix()},
    "causal-usa-normalised": {"beta": 2.0, "mask": "causal", "attention": "unnormalized"},
    "random-shared": {"beta": 1.0, "random": {"layers": 4, "eta": 0.25, "heads": 2, "seed": 11, "ffn_width": 5}},
}
POSITIONS = {"causal-sa-alibi": {"decay": 1.5}, "causal-usa-normalised": {"decay": 2.0, "normalise": True}}


def batch_tokens(config: dict, prompts: int, times: list[float], **kwargs) -> np.ndarray:
    batch = prompt_batch(Problem(load_config(config)), prompts, kwargs.pop("per_prompt", None))
    out = np.full((prompts, len(times), batch.n, batch.d), np.nan)

    def observe(chunk, k, x):
        out[chunk.start:chunk.stop, k] = np.asarray(x)

    run_batch(batch, times, observe, **kwargs)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_batch_equals_single_runs(case: str) -> None:
    """Each prompt equals the existing single-prompt run (its sampler, field, RK4 and steps) to 1e-12,
    with a chunk of 2 prompts (memory budget) so that chunking is exercised."""
    config = _config(CASES[case], positions=POSITIONS.get(case))
    times = [0.0, 0.5, 1.0]
    single = single_runs(config, 3, times)
    per = bytes_per_prompt(6, D, 2, 5)
    batched = batch_tokens(config, 3, times, memory=2 * per)
    assert np.abs(batched[:, 1:] - batched[:, :1]).max() > 1e-2  # the tokens moved
    assert np.abs(batched - single).max() < 1e-12


def test_per_prompt_random_weights_residual() -> None:
    """Weights drawn per prompt: prompt b is the run with model.random.seed + b (residual update)."""
    model = {"beta": 1.0, "random": {"layers": 4, "eta": 0.25, "seed": 3, "per_prompt": True}}
    config = _config(model, integrator="residual")
    times = [0.5, 1.0]
    single = single_runs(config, 3, times, shift_random=True)
    batched = batch_tokens(config, 3, times, memory=1)
    assert np.abs(batched - single).max() < 1e-12
    shared = batch_tokens(config, 3, times, per_prompt=False)
    assert np.abs(shared[1:] - batched[1:]).max() > 1e-3  # prompts 1, 2 drew other weights
    assert np.abs(shared[0] - batched[0]).max() < 1e-14  # prompt 0 has the law's own seed


def test_chunk_size() -> None:
    per = bytes_per_prompt(32, 128)
    assert per == 8 * (12 * 32 * 128 + 3 * 32 * 32)
    assert chunk_size(1000, per, 10 * per + 5) == 10
    assert chunk_size(1000, per, 1) == 1 and chunk_size(3, per, 10**12) == 3


@pytest.mark.parametrize("model, what", [
    ({"beta": 1.0, "random": {"layers": 2, "eta": 0.5, "per_prompt": True}}, None),
    ({"beta": 1.0}, "model.random.per_prompt"),
])
def test_per_prompt_needs_random_weights(model: dict, what: str | None) -> None:
    problem = Problem(load_config(_config(model)))
    if what is None:
        assert prompt_batch(problem, 2).own_weights > 0
    else:
        with pytest.raises(ConfigError, match=what):
            prompt_batch(problem, 2, per_prompt=True)
    with pytest.raises(ConfigError, match="particles.prompts"):
        prompt_batch(problem, 0)

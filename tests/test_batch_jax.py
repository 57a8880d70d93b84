"""The JAX path of the batched token engine (on the CPU) against numpy: 1e-12 in float64."""

from __future__ import annotations

import numpy as np
import pytest
from test_batch_tokens import CASES, POSITIONS, _config, batch_tokens

from meanfield.particles.arrays import ArrayBackend, BackendError


@pytest.mark.slow
@pytest.mark.parametrize("case", ["heads-ffn-layers", "causal-usa-normalised"])
def test_jax_equals_numpy(case: str) -> None:
    import jax

    config = _config(CASES[case], positions=POSITIONS.get(case))
    times = [0.0, 0.5, 1.0]
    expected = batch_tokens(config, 3, times)
    got = batch_tokens(config, 3, times, backend=ArrayBackend.make("jax", "cpu"))
    assert np.abs(got - expected).max() < 1e-12
    assert not jax.config.jax_enable_x64  # float64 was switched on for the engine only
    single = batch_tokens(config, 3, times, backend=ArrayBackend.make("jax", "cpu", "float32"))
    assert 1e-9 < np.abs(single - expected).max() < 1e-4  # float32 computed, and close


def test_jax_missing_refused(monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "jax", None)  # import jax raises ImportError
    with pytest.raises(BackendError, match="particles.device: 'jax' needs JAX, which is not installed"):
        ArrayBackend.for_device("gpu")


def test_devices_refused() -> None:
    with pytest.raises(BackendError, match="numpy engine runs on the CPU only"):
        ArrayBackend.make("numpy", "gpu")
    with pytest.raises(BackendError, match="particles.device: must be one of"):
        ArrayBackend.make("numpy", "tpu")
    import jax

    if not any(d.platform == "gpu" for d in jax.devices()):
        with pytest.raises(BackendError, match="no GPU device is visible to JAX"):
            ArrayBackend.for_device("gpu")
    else:
        assert ArrayBackend.for_device("gpu").device == "gpu"


def test_jax_is_imported_only_for_a_jax_engine() -> None:
    """``import meanfield``, the engine and the phase study leave JAX out until a JAX backend is made."""
    import subprocess
    import sys

    from helpers.cli import REPO, cli_environment

    code = ("import sys, meanfield, meanfield.particles.batch, meanfield.studies.phase, meanfield.cli.program; "
            "print('jax' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_environment(), capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"

"""precision= on Network.from_json / Network.load and the Network.precision property: the
matrix products' arithmetic, as --precision (docs/python.md). On the CPU, bf16 is emulated
exactly (operands rounded to bf16, fp32 sums: kernels/formulas/precision.h), so its scores are
close to fp32's but not equal, and the same on every run."""

import numpy as np
import pytest

import sparsenet
from conftest import AUTOENCODER


def test_bf16_training_and_scores_follow_the_precision(train, tmp_path):
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu", threads=2, seed=5,
                                      precision="bf16")
    assert net.precision == "bf16"  # before the weights exist: what was asked for
    net.fit(train, epochs=1)
    assert net.precision == "bf16"
    path = tmp_path / "bf16.nc"
    net.save(path)

    fp32 = sparsenet.Network.load(path, device="cpu", threads=2)
    bf16 = sparsenet.Network.load(path, device="cpu", threads=2, precision="bf16")
    assert fp32.precision == "fp32" and bf16.precision == "bf16"
    a, b = fp32.scores(train), bf16.scores(train)
    assert a.shape == b.shape
    assert not np.array_equal(a, b)  # the operands were rounded to bf16
    # bf16 keeps 8 bits of mantissa: each product's operands within 2^-9 relative.
    np.testing.assert_allclose(b, a, rtol=0.05, atol=0.02)
    np.testing.assert_array_equal(b, bf16.scores(train))  # deterministic

    bf16.precision = "fp32"  # switched between calls
    assert bf16.precision == "fp32"
    np.testing.assert_array_equal(bf16.scores(train), a)


def test_an_unknown_precision_is_refused_naming_the_choices(tmp_path):
    with pytest.raises(sparsenet.UsageError, match="expected fp32, tf32 or bf16"):
        sparsenet.Network.from_json(AUTOENCODER, device="cpu", precision="fp8")
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu")
    with pytest.raises(ValueError, match="'half' is unknown"):
        net.precision = "half"
    assert net.precision is None

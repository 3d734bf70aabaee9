"""Errors reach Python as exceptions carrying the library's message; nothing crashes."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

import sparsenet
from conftest import AUTOENCODER


def test_config_errors(tmp_path):
    with pytest.raises(sparsenet.FileError, match="nope.json"):
        sparsenet.Network.from_json(tmp_path / "nope.json")
    bad = json.loads(json.dumps(AUTOENCODER))
    bad["Layers"][1]["Activation"] = "Wiggle"
    with pytest.raises(sparsenet.ConfigError, match=r"\$\.Layers\[1\]\.Activation.*Wiggle"):
        sparsenet.Network.from_json(bad)
    (tmp_path / "broken.json").write_text("{ \"Layers\": [ }")
    with pytest.raises(sparsenet.ConfigError, match="broken.json"):
        sparsenet.Network.from_json(tmp_path / "broken.json")
    with pytest.raises(sparsenet.FileError, match="model.nc"):
        sparsenet.Network.load(tmp_path / "model.nc")
    with pytest.raises(sparsenet.FileError):
        sparsenet.Recommender(tmp_path / "model.nc")


def test_shape_and_name_errors(train, tmp_path):
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu")
    with pytest.raises(sparsenet.UsageError, match="no weights yet"):
        net.predict(train)
    net.fit(train, epochs=1, progress=False)
    wide = sp.random(10, train.cols + 5, density=0.1, format="csr", random_state=0)
    with pytest.raises(sparsenet.DataError, match="columns"):
        net.predict(wide)
    with pytest.raises(sparsenet.DataError):
        net.fit(wide, epochs=1, progress=False)
    with pytest.raises(sparsenet.UsageError, match="neither a dataset nor a layer"):
        net.fit({"nope": train}, progress=False)
    with pytest.raises(sparsenet.Error, match="Nowhere"):
        net.predict(train, output_layer="Nowhere")
    with pytest.raises(sparsenet.UsageError, match="k must be positive"):
        net.predict(train, k=0)
    with pytest.raises(sparsenet.UsageError, match="optimizer|Optimizer|sgd"):
        net.fit(train, optimizer="magic", progress=False)
    with pytest.raises(sparsenet.UsageError, match="keep_best"):
        net.fit(train, keep_best="recall@20", progress=False)
    with pytest.raises(sparsenet.Error):
        net.get_parameter("weight:Nowhere->Hidden")
    net.save(tmp_path / "m.nc")
    rec = sparsenet.Recommender(tmp_path / "m.nc", device="cpu")
    with pytest.raises(sparsenet.DataError, match="999999"):
        rec.recommend([1, 999999])
    r = rec.recommend([1, 999999], ignore_unknown=True, k=5)
    assert r.unknown == ["999999"] and len(r.ids) == 5 and 1 not in r.ids
    with pytest.raises(sparsenet.UsageError):
        rec.id_of("a")  # no features index


def test_bad_arrays():
    with pytest.raises(sparsenet.DataError, match="dtype"):
        sparsenet.Dataset.from_scipy(sp.csr_array(np.array([[1 + 1j, 0]])))
    with pytest.raises(sparsenet.DataError):
        sparsenet.evaluate(np.zeros((3, 2), np.uint32), np.zeros((3, 2), np.float32),
                           sp.csr_array(np.ones((4, 2))))

"""ANN index from Python: build_ann_index, Recommender(ann_index=...): a flat index of FP32
vectors answers exactly what the Recommender answers without one; an index of another model is
refused; 16-bit vectors (the default) and bf16_input_weights load and answer; cells (kind ivf,
the default) scanned all answer as the flat index of the same vectors."""

import json

import numpy as np
import pytest

import sparsenet
from conftest import AUTOENCODER

pytestmark = pytest.mark.skipif(not sparsenet._core.ann_index_available(),
                                reason="built without ANN indexes")


def test_flat_index_answers_exactly_and_foreign_index_is_refused(train, tmp_path):
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu")
    net.fit(train, epochs=1, progress=False)
    net.save(tmp_path / "m.nc")
    report = sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "m.ann", kind="flat",
                                       vectors="fp32")
    assert report["items"] == train.cols and report["kind"] == "flat"
    assert report["vectors"] == "fp32"
    exact = sparsenet.Recommender(tmp_path / "m.nc", device="cpu")
    ann = sparsenet.Recommender(tmp_path / "m.nc", device="cpu", ann_index=tmp_path / "m.ann")
    assert ann.ann and not exact.ann
    for query in ([1, 5, 9], [0], [17, 300, 42, 8]):
        want = exact.recommend(query, k=20, deny=[2, 3])
        got = ann.recommend(query, k=20, deny=[2, 3])
        assert list(got.ids) == list(want.ids) and list(got.scores) == list(want.scores)
    assert ann.ann_queries == 3
    with pytest.raises(sparsenet.UsageError, match="--kind 'nope'"):
        sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "x.ann", kind="nope")

    other = sparsenet.Network.from_json(AUTOENCODER, device="cpu")
    other.fit(train, epochs=2, progress=False)  # other weights: another fingerprint
    other.save(tmp_path / "o.nc")
    with pytest.raises(sparsenet.DataError, match="m.ann"):
        sparsenet.Recommender(tmp_path / "o.nc", device="cpu", ann_index=tmp_path / "m.ann")


def test_sixteen_bit_vectors_and_bf16_input_weights(train, tmp_path):
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu")
    net.fit(train, epochs=1, progress=False)
    net.save(tmp_path / "m.nc")
    report = sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "m.ann", kind="flat")
    assert report["vectors"] == "fp16"
    fp32 = sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "m32.ann", kind="flat",
                                     vectors="fp32")
    assert report["index_bytes"] < fp32["index_bytes"] * 0.6
    ann = sparsenet.Recommender(tmp_path / "m.nc", device="cpu", ann_index=tmp_path / "m.ann",
                                bf16_input_weights=True)
    assert ann.ann_memory_bytes > 0 and ann.released_bytes > 0
    got = ann.recommend([1, 5, 9], k=20)
    assert len(got.ids) == 20
    with pytest.raises(sparsenet.UsageError, match="--vectors 'fp8'"):
        sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "x.ann", vectors="fp8")


def test_cells_scanned_all_answer_as_a_flat_index(train, tmp_path):
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu")
    net.fit(train, epochs=1, progress=False)
    net.save(tmp_path / "m.nc")
    report = sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "m.ann", cells=16)
    assert report["kind"] == "ivf" and report["cells"] == 16 and report["probe"] == 8
    sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "f.ann", kind="flat")
    cells = sparsenet.Recommender(tmp_path / "m.nc", device="cpu", ann_index=tmp_path / "m.ann",
                                  ann_probe=16)
    flat = sparsenet.Recommender(tmp_path / "m.nc", device="cpu", ann_index=tmp_path / "f.ann")
    for query in ([1, 5, 9], [0], [17, 300, 42, 8]):
        want = flat.recommend(query, k=20, deny=[2, 3])
        got = cells.recommend(query, k=20, deny=[2, 3])
        assert list(got.ids) == list(want.ids) and list(got.scores) == list(want.scores)
    with pytest.raises(sparsenet.UsageError, match="--probe 17: expected at most the 16 cells"):
        sparsenet.build_ann_index(tmp_path / "m.nc", tmp_path / "x.ann", cells=16, probe=17)


def test_softmax_layers_answer_logits_from_an_index(train, tmp_path):
    config = json.loads(json.dumps(AUTOENCODER))
    config["Layers"][2]["Activation"] = "SoftMax"
    config["ErrorFunction"] = "CrossEntropy"
    del config["ScaledMarginalCrossEntropy"]
    net = sparsenet.Network.from_json(config, device="cpu")
    net.fit(train, epochs=1, progress=False)
    net.save(tmp_path / "s.nc")
    sparsenet.build_ann_index(tmp_path / "s.nc", tmp_path / "s.ann", kind="flat", vectors="fp32")
    exact = sparsenet.Recommender(tmp_path / "s.nc", device="cpu")
    ann = sparsenet.Recommender(tmp_path / "s.nc", device="cpu", ann_index=tmp_path / "s.ann")
    want = exact.recommend([1, 5, 9], k=10)
    got = ann.recommend([1, 5, 9], k=10)
    assert not want.logits and got.logits
    assert list(got.ids) == list(want.ids)
    # exp of the logits' differences: the probabilities' ratios
    ratios = np.exp(got.scores.astype(np.float64) - float(got.scores[0]))
    assert np.allclose(ratios, want.scores / want.scores[0], rtol=1e-5)

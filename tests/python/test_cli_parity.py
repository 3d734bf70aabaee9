"""The package against the CLI: the same training gives the same weights bit for bit (same seed
and threads), and the same predictions (the recs file byte for byte)."""

import json

import numpy as np
import pytest

import sparsenet
from conftest import AUTOENCODER, run_cli

THREADS = 2


def assert_same_parameters(a, b):
    assert a.parameters() == b.parameters()
    for name in a.parameters():
        x, y = a.get_parameter(name), b.get_parameter(name)
        assert x.dtype == np.float32
        assert np.array_equal(x, y), f"{name}: differs in {np.sum(x != y)} entries"


@pytest.fixture(scope="module")
def cli_model(data, config_file, tmp_path_factory):
    model = tmp_path_factory.mktemp("cli") / "model.nc"
    run_cli("train", "-c", config_file, "-i", data / "train.nc", "-n", model, "-e", 3,
            "--seed", 11, "--threads", THREADS, "--device", "cpu", "-q")
    return model


def test_training_reproduces_the_cli_bit_for_bit(train, cli_model, tmp_path):
    # Through scipy: the CLI read train.nc; Python gets the same rows as a scipy matrix.
    x = train.to_scipy()
    net = sparsenet.Network.from_json(AUTOENCODER, device="cpu", threads=THREADS)
    history = net.fit(x, epochs=3, seed=11, progress=False)
    assert [h["epoch"] for h in history] == [1, 2, 3] and all(h["complete"] for h in history)
    assert history[-1]["loss"] < history[0]["loss"]
    cli = sparsenet.Network.load(cli_model, device="cpu", threads=THREADS)
    assert_same_parameters(net, cli)
    # save / load keeps them exactly.
    net.save(tmp_path / "py.nc")
    assert_same_parameters(sparsenet.Network.load(tmp_path / "py.nc", device="cpu"), cli)


def test_keep_best_validation_matches_the_cli(data, config_file, train, heldout, tmp_path):
    model = tmp_path / "best.nc"
    metrics = tmp_path / "metrics.jsonl"
    run_cli("train", "-c", config_file, "-i", data / "train.nc", "-n", model, "-e", 3,
            "--seed", 5, "--threads", THREADS, "--device", "cpu", "--learning-rate", 0.02,
            "--validate-input", data / "train.nc", "--validate-target", data / "heldout.nc",
            "--validate-k", "10,20", "--keep-best", "ndcg@10", "--metrics-out", metrics, "-q")
    net = sparsenet.Network.from_json(config_file, device="cpu", threads=THREADS)
    history = net.fit(train, epochs=3, seed=5, learning_rate=0.02, validation=(train, heldout),
                      validate_k=[10, 20], keep_best="ndcg@10", progress=False)

    cli_lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert len(cli_lines) == len(history) == 3
    for ours, theirs in zip(history, cli_lines):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-8)  # printed with %.9g
        assert ours["validation"] == theirs["validation"]  # every metric, exactly
    assert_same_parameters(net, sparsenet.Network.load(model, device="cpu"))


def test_predictions_equal_the_cli(data, cli_model, train, tmp_path):
    recs = tmp_path / "cli.recs"
    run_cli("predict", "-n", cli_model, "--input", data / "train.nc", "-k", 25, "-s", recs,
            "--threads", THREADS, "--device", "cpu")
    net = sparsenet.Network.load(cli_model, device="cpu", threads=THREADS)
    ids, scores = net.predict(train.to_scipy(), k=25)
    assert ids.shape == (train.rows, 25) and ids.dtype == np.uint32
    assert scores.dtype == np.float32
    sparsenet.write_recs(tmp_path / "py.recs", ids, scores)
    assert (tmp_path / "py.recs").read_bytes() == recs.read_bytes()
    # The input items are excluded; with exclude=None they may come back.
    x = train.to_scipy()
    for r in range(0, train.rows, 97):
        assert not set(ids[r]) & set(x[[r], :].indices)
    kept, _ = net.predict(x, k=25, exclude=None)
    assert any(set(kept[r]) & set(x[[r], :].indices) for r in range(train.rows))
    # The same arrays the scores give: the top entry is the largest non-input score. Equal up
    # to rounding, not bit for bit: a 5-row GEMM blocks its sums differently from predict's
    # 1024-row batches (CI saw 0.09250056 against 0.09250054), so the argmax may be a near tie.
    dense = net.scores(x[:5])
    for r in range(5):
        s = dense[r].copy()
        s[x[[r], :].indices] = -np.inf
        assert scores[r, 0] == pytest.approx(s.max(), rel=1e-5)
        assert s[ids[r, 0]] == pytest.approx(s.max(), rel=1e-5)


def test_evaluate_matches_the_cli(data, cli_model, train, heldout, tmp_path):
    recs = tmp_path / "cli.recs"
    run_cli("predict", "-n", cli_model, "--input", data / "train.nc", "-k", 20, "-s", recs,
            "--threads", THREADS, "--device", "cpu")
    run_cli("evaluate", "--recs", recs, "--heldout", data / "heldout.nc", "-k", 20,
                  "--input", data / "train.nc", "--json", tmp_path / "m.json")

    cli = json.loads((tmp_path / "m.json").read_text())
    net = sparsenet.Network.load(cli_model, device="cpu", threads=THREADS)
    ids, scores = net.predict(train, k=20)
    ours = sparsenet.evaluate(ids, scores, heldout, k=20)
    assert ours == cli["recs"]  # every metric, exactly


def test_recommender_agrees_with_predict(cli_model, train, tmp_path):
    x = train.to_scipy()
    net = sparsenet.Network.load(cli_model, device="cpu", threads=THREADS)
    ids, scores = net.predict(x[:20], k=10)
    names = [f"item{i}" for i in range(train.cols)]
    sparsenet.write_index(tmp_path / "items.index", names)
    rec = sparsenet.Recommender(cli_model, features_index=tmp_path / "items.index",
                                device="cpu")
    assert rec.has_names and rec.output_items == train.cols
    assert rec.id_of("item7") == 7 and rec.name_of(7) == "item7"
    for r in range(20):
        got = rec.recommend([names[i] for i in x[[r], :].indices], k=10)
        np.testing.assert_array_equal(got.ids, ids[r])
        np.testing.assert_allclose(got.scores, scores[r], rtol=1e-5)
        assert got.names == [names[i] for i in ids[r]]
    # allow / deny lists, by name or id
    first = rec.recommend([0, 1], k=3)
    denied = rec.recommend([0, 1], k=3, deny=[int(first.ids[0])])
    assert int(first.ids[0]) not in denied.ids
    allowed = rec.recommend({0: 1.0, "item1": 2.0}, k=5, allow=["item5", 6])
    assert sorted(allowed.ids.tolist()) == [5, 6]

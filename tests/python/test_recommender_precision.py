"""Recommender(precision=..., bf16_weights_only=...): the library's RecommenderOptions::precision
and bf16_weights_only (docs/python.md). The answers equal those of `sparsenet serve --precision
bf16 --bf16-weights-only` (the C++ Recommender behind the CLI) for the same model and queries, ids
and scores exactly; a value or a combination the library refuses raises UsageError naming the
argument and what it accepts."""

import json
import urllib.request

import numpy as np
import pytest

import sparsenet
from conftest import serving, train_small_model

# Ids, and (id, weight) pairs (a [id, weight] array in the server's JSON).
QUERIES = [[1, 2, 3], [10], [5, 50, 120, 300], [7, (8, 2.0)], [399, 0, 200]]
K = 10


@pytest.fixture(scope="module")
def model(data, config_file, tmp_path_factory):
    return train_small_model(data, config_file,
                             tmp_path_factory.mktemp("recommender_precision") / "model.nc")


@pytest.fixture()
def bf16_server(model, tmp_path):
    """`sparsenet serve --precision bf16 --bf16-weights-only` on a free port: its URL."""
    with serving(model, tmp_path / "serve.log", "--precision", "bf16",
                 "--bf16-weights-only") as url:
        yield url


def served(url, items):
    """(ids uint32, scores float32) of POST /recommend."""
    body = {"items": [list(i) if isinstance(i, tuple) else i for i in items], "k": K}
    req = urllib.request.Request(url + "/recommend", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        answer = json.loads(r.read())
    return (np.array([i["id"] for i in answer["items"]], dtype=np.uint32),
            np.array([i["score"] for i in answer["items"]], dtype=np.float32))


def test_bf16_answers_equal_the_cli_server(model, bf16_server):
    rec = sparsenet.Recommender(model, device="cpu", precision="bf16", bf16_weights_only=True)
    bf16 = sparsenet.Recommender(model, device="cpu", precision="BF16")  # FP32 weights kept
    fp32 = sparsenet.Recommender(model, device="cpu", precision="fp32")
    differs = False
    for q in QUERIES:
        ids, scores = served(bf16_server, q)
        r = rec.recommend(q, K)
        assert len(ids) == K
        np.testing.assert_array_equal(r.ids, ids)
        np.testing.assert_array_equal(r.scores, scores)  # 9 digits give back the float exactly
        kept = bf16.recommend(q, K)  # the GEMMs read the BF16 copies either way
        np.testing.assert_array_equal(kept.ids, r.ids)
        np.testing.assert_array_equal(kept.scores, r.scores)
        batch = rec.recommend_batch([q], K)[0]
        np.testing.assert_array_equal(batch.ids, r.ids)
        other = fp32.recommend(q, K)
        differs = differs or not np.array_equal(other.scores, r.scores)
        # bf16 keeps 8 bits of mantissa: close to fp32's scores, not equal.
        np.testing.assert_allclose(np.sort(other.scores), np.sort(r.scores), rtol=0.05,
                                   atol=0.02)
    assert differs, "precision='bf16' answered exactly as fp32"


def test_refused_values_and_combinations_name_the_argument(model):
    with pytest.raises(sparsenet.UsageError,
                       match=r"precision='fp8' is unknown; expected 'fp32', 'tf32' or 'bf16'"):
        sparsenet.Recommender(model, device="cpu", precision="fp8")
    with pytest.raises(sparsenet.UsageError, match=r"bf16_weights_only='yes'; expected True or "
                                                   r"False"):
        sparsenet.Recommender(model, device="cpu", precision="bf16", bf16_weights_only="yes")
    with pytest.raises(sparsenet.UsageError, match=r"bf16_weights_only=True needs "
                                                   r"precision='bf16'.*got precision='fp32'"):
        sparsenet.Recommender(model, device="cpu", precision="fp32", bf16_weights_only=True)
    # No precision: the model's (this one trained in fp32), which the library refuses.
    with pytest.raises(sparsenet.UsageError, match=r"bf16_weights_only=True needs "
                                                   r"precision='bf16'.*needs precision bf16"):
        sparsenet.Recommender(model, device="cpu", bf16_weights_only=True)
    with pytest.raises(sparsenet.UsageError, match=r"bf16_weights_only=True and "
                                                   r"fp16_screening=True exclude each other"):
        sparsenet.Recommender(model, device="cpu", precision="bf16", bf16_weights_only=True,
                              fp16_screening=True)
    with pytest.raises(sparsenet.UsageError, match=r"bf16_input_weights=1; expected True or "
                                                   r"False"):
        sparsenet.Recommender(model, device="cpu", bf16_input_weights=1)

"""`sparsenet serve`'s /metrics read by Prometheus's own Python client parser
(prometheus_client.parser, the text exposition format 0.0.4): every family parses, with the type
its `# TYPE` line declares, and the counts are those of the requests sent."""

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import serving, train_small_model


@pytest.fixture(scope="module")
def model(data, config_file, tmp_path_factory):
    return train_small_model(data, config_file,
                             tmp_path_factory.mktemp("serve_metrics") / "model.nc")


@pytest.fixture()
def server(model, tmp_path):
    with serving(model, tmp_path / "serve.log") as url:
        yield url


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_metrics_parse_as_prometheus_text_with_the_counts_sent(server):
    for i in range(5):
        assert post(server, "/recommend", {"items": [i, i + 1], "k": 5}) == 200
    assert post(server, "/recommend/batch", [{"items": [1]}, {"items": [2]}]) == 200
    assert post(server, "/recommend", {"items": "not a list"}) == 400
    with urllib.request.urlopen(server + "/metrics") as r:
        assert r.headers.get_content_type() == "text/plain"
        text = r.read().decode()

    families = {f.name: f for f in text_string_to_metric_families(text)}
    # Every `# TYPE` line names a family the parser read with that type.
    declared = {line.split()[2]: line.split()[3] for line in text.splitlines()
                if line.startswith("# TYPE ")}
    assert declared, text
    for name, kind in declared.items():
        parsed = name[:-len("_total")] if kind == "counter" and name.endswith("_total") else name
        assert parsed in families, f"{name} ({kind}) not parsed:\n{text}"
        assert families[parsed].type == kind, name

    def value(family, sample_name, **labels):
        for s in families[family].samples:
            if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        raise AssertionError(f"{sample_name} {labels} missing:\n{text}")

    assert value("sparsenet_requests", "sparsenet_requests_total",
                 endpoint="/recommend", status="200") == 5
    assert value("sparsenet_requests", "sparsenet_requests_total",
                 endpoint="/recommend", status="400") == 1
    assert value("sparsenet_queries", "sparsenet_queries_total", endpoint="/recommend/batch") == 2
    # The histogram: cumulative buckets ending in +Inf, equal to its count.
    buckets = [(float(s.labels["le"]), s.value)
               for s in families["sparsenet_request_duration_seconds"].samples
               if s.name.endswith("_bucket") and s.labels.get("endpoint") == "/recommend"]
    assert buckets[-1][0] == float("inf")
    assert [b for b, _ in buckets] == sorted(b for b, _ in buckets)
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert buckets[-1][1] == value("sparsenet_request_duration_seconds",
                                   "sparsenet_request_duration_seconds_count",
                                   endpoint="/recommend")

"""The ANN index's peers over the same vectors and queries, in the same run (bench.py --peers;
docs/benchmarks-ann.md, "ANN index against faiss and hnswlib").

- search alone, in C++ (`sparsenet_bench_ann_search`): the project's ivf indexes of the run
  (and any --extra-index) beside Debian's faiss (libfaiss-dev, linked into the workbench when the
  build found it), IndexIVFFlat with inner product at the same cells and probes;
- search alone, from Python: PyPI's faiss-cpu (the same IndexIVFFlat) and hnswlib 0.8's graph in
  its 'ip' space at the project's M, efConstruction and efSearch values.
Every index fetches k plus the query's own items, drops those, and is scored by recall@k
against the exact answers; one query at a time on one thread; built on --threads threads.
The vectors are [w_i, b_i] (FP32) and the queries [h, 1], h each held-out user's hidden
activations from the model's own forward pass (Network.scores), so the order is the output
layer's."""

import json
import os
import subprocess
import time

import numpy as np

import sparsenet


def _log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _percentile(values, p):
    return float(np.percentile(np.asarray(values), p)) if len(values) else 0.0


def _recall(approx, exact):
    total = 0.0
    for a, e in zip(approx, exact):
        total += len(set(a) & set(e)) / max(1, len(e))
    return total / max(1, len(exact))


def query_activations(model, queries, threads):
    """(vectors [n, width + 1] = [w_i, b_i], h [queries, width]) of the model's output layer."""
    import scipy.sparse as sp

    net = sparsenet.Network.load(model, device="cpu", threads=threads)
    w = np.asarray(net.get_parameter("weight:Hidden->Output"), dtype=np.float32)  # [hidden, n]
    b = np.asarray(net.get_parameter("bias:Output"), dtype=np.float32).reshape(-1)
    vectors = np.ascontiguousarray(np.hstack([w.T, b[:, None]]))
    n = vectors.shape[0]
    rows = np.repeat(np.arange(len(queries)), [len(q) for q in queries])
    x = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, np.concatenate(queries))),
                      shape=(len(queries), n))
    h = np.ascontiguousarray(np.asarray(net.scores(x, output_layer="Hidden"), dtype=np.float32))
    return vectors, h


def search_alone(workbench, model, indexes, h, queries, exact_ids, args, cells, probes, work):
    """The workbench's JSON: the project's `indexes` (label -> file) and Debian's faiss."""
    h_path = os.path.join(work, "queries-h.f32")
    items_path = os.path.join(work, "queries-items.txt")
    exact_path = os.path.join(work, "queries-exact.txt")
    h.astype(np.float32).tofile(h_path)
    with open(items_path, "w") as f:
        f.writelines(" ".join(map(str, q)) + "\n" for q in queries)
    with open(exact_path, "w") as f:
        f.writelines(" ".join(map(str, e)) + "\n" for e in exact_ids)
    cmd = [workbench, "--model", model, "--h", h_path, "--items", items_path, "--exact",
           exact_path, "--probes", ",".join(map(str, probes)), "--k", str(args.k),
           "--threads", str(args.threads), "--faiss-cells", str(cells)]
    for path in indexes.values():
        cmd += ["--index", path]
    _log("$ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    out = json.loads(r.stdout)
    by_path = {path: label for label, path in indexes.items()}
    out["sparsenet"] = {by_path[path]: v for path, v in out["sparsenet"].items()}
    _log(f"search alone: {json.dumps(out)}")
    return out


def python_peers(vectors, h, queries, exact_ids, args, cells, probes, efs):
    """PyPI's faiss-cpu IndexIVFFlat (inner product) and hnswlib's 'ip' graph, from Python."""
    import faiss
    import hnswlib

    n, d = vectors.shape
    q = np.ascontiguousarray(np.hstack([h, np.ones((len(queries), 1), np.float32)]))

    def curve(search, knobs, set_knob):
        points = []
        for knob in knobs:
            set_knob(knob)
            ids, lat = [], []
            for i, items in enumerate(queries):
                t = time.perf_counter()
                found = search(q[i:i + 1], args.k + len(items))
                lat.append(time.perf_counter() - t)
                mine = set(items)
                ids.append([int(j) for j in found if j >= 0 and j not in mine][:args.k])
            point = {"probe": knob, "recall_at_100": _recall(ids, exact_ids),
                     "p50_ms": _percentile(lat, 50) * 1e3, "p99_ms": _percentile(lat, 99) * 1e3,
                     "queries_per_s": len(lat) / sum(lat)}
            _log(f"peer probe {knob}: {point}")
            points.append(point)
        return points

    peers = {}
    faiss.omp_set_num_threads(args.threads)
    t = time.perf_counter()
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, cells, faiss.METRIC_INNER_PRODUCT)
    ivf.train(vectors)
    ivf.add(vectors)
    build = time.perf_counter() - t
    faiss.omp_set_num_threads(1)
    peers["faiss-ivfflat-ip"] = {
        "version": faiss.__version__, "cells": cells, "build_s": build,
        "bytes_per_item": d * 4 + 8,
        "curve": curve(lambda v, k: ivf.search(v, k)[1][0], [p for p in probes if p <= cells],
                       lambda p: setattr(ivf, "nprobe", p))}
    del ivf
    graph = hnswlib.Index(space="ip", dim=d)
    t = time.perf_counter()
    graph.init_index(max_elements=n, ef_construction=args.ef_construction, M=args.hnsw_m)
    graph.set_num_threads(args.threads)
    graph.add_items(vectors, np.arange(n))
    build = time.perf_counter() - t
    graph.set_num_threads(1)
    ef_now = [0]

    def graph_search(v, k):  # efSearch at least the items fetched (hnswlib needs ef >= k)
        graph.set_ef(max(ef_now[0], k))
        return graph.knn_query(v, k=k)[0][0]

    peers["hnswlib-ip"] = {
        "version": getattr(hnswlib, "__version__", "0.8.0"), "M": args.hnsw_m,
        "ef_construction": args.ef_construction, "build_s": build,
        "curve": curve(graph_search, efs, lambda ef: ef_now.__setitem__(0, ef))}
    return peers

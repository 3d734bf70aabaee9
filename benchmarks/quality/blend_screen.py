#!/usr/bin/env python3
"""The selection of a FixedWeights path on validation (docs/quality.md, "A linear path in the same
network"): Lambda and Scale of an inference-only EASE edge (`"InTraining": false`) beside a
trained autoencoder, or with --fit graphfilter K, IdealWeight and Scale of a GraphFilter edge
(GF-CF's filters, the formula of src/engine/linear_fit.h, computed here with numpy/scipy).

With InTraining false the autoencoder trains exactly as without the edge, so one trained model
serves every (Lambda, Scale): its output logits z (log of the SoftMax scores, up to a per-user
constant that no ranking sees) plus the edge's Scale * x' B, x' being the input row as the Input
layer sees it (after its Normalize: s * x / ||x||) and B = EASE(lambda) fitted on the stored rows
(benchmarks/peers/ease.py's ease_weights, the formula of src/engine/linear_fit.h), rank the items
exactly as the network with that edge does. Recall@20 and NDCG@20 on the validation users'
held-out items (training items excluded), for every point of the grid; one JSON line each, then
the best.

usage: blend_screen.py --model AE.nc --train TRAIN_FIT.nc --validation VALIDATION.nc
       [--lambdas 250,500,1000,2000] [--scales 2,4,8,16] [--threads 2] [--cache DIR]
       [--fit graphfilter --ks 64,128,256 --ideal-weights 1,3]
(needs the Python package, build/python, and benchmarks/.venv's netCDF4: run it with
PYTHONPATH=build/python benchmarks/.venv/bin/python.)
"""
import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--model", required=True, help="the autoencoder trained on --train")
p.add_argument("--train", required=True)
p.add_argument("--validation", required=True)
p.add_argument("--lambdas", default="250,500,1000,2000")
p.add_argument("--scales", default="2,4,8,16")
p.add_argument("--k", type=int, default=20)
p.add_argument("--fit", choices=["ease", "graphfilter"], default="ease")
p.add_argument("--ks", default="64,128,256", help="GraphFilter: K values")
p.add_argument("--ideal-weights", default="1,3", help="GraphFilter: IdealWeight values")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--cache", default=None,
               help="folder keeping each Lambda's B as ease-<lambda>.npy (Gowalla's: 6.7 GB, and "
                    "minutes to fit), so that a wider Scale grid needs no refit")
a = p.parse_args()
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import sparsenet  # noqa: E402


def read_csr(path):
    """The first dataset of a netCDF file, binary, as scipy CSR (through the package's reader)."""
    m = sparsenet.Dataset.load(path).to_scipy()
    m.data[:] = 1.0
    return sp.csr_matrix(m)


def graph_filter_weights(X, k, ideal_weight, a=0.5, b=0.5):
    """B of Fit GraphFilter: R~^T R~ + ideal_weight * di^-b V V^T di^b, R~ = du^-a X di^-b."""
    du = np.asarray(X.sum(1)).ravel()
    di = np.asarray(X.sum(0)).ravel()
    ru = np.where(du > 0, np.power(np.maximum(du, 1e-30), -a), 0.0)
    ci = np.where(di > 0, np.power(np.maximum(di, 1e-30), -b), 0.0)
    R = sp.diags(ru) @ X @ sp.diags(ci)
    B = (R.T @ R).toarray().astype(np.float32)
    if k > 0 and ideal_weight > 0:
        import scipy.sparse.linalg as sla
        _, _, vt = sla.svds(R.astype(np.float64), k=k, random_state=0)
        V = vt.T.astype(np.float32)
        inv = np.where(ci > 0, 1.0 / np.maximum(ci, 1e-30), 0.0).astype(np.float32)
        left = np.float32(ideal_weight) * ci.astype(np.float32)
        for r0 in range(0, B.shape[0], 2048):  # by blocks of rows: Gowalla's B alone is 6.7 GB
            r1 = min(r0 + 2048, B.shape[0])
            B[r0:r1] += left[r0:r1, None] * (V[r0:r1] @ V.T) * inv[None, :]
    return B


X = read_csr(a.train)
H = read_csr(a.validation)
net = sparsenet.Network.load(a.model, threads=a.threads)
inputs = [layer for layer in net.config["Layers"] if layer.get("Kind") == "Input"]
if len(inputs) != 1:
    sys.exit(f"{a.model}: one Input layer expected, found {len(inputs)}")
norm = inputs[0].get("Normalize", {}).get("Scale", 0.0)
users = np.flatnonzero(np.diff(H.indptr) > 0)
Xu = X[users]
name = inputs[0]["DataSet"]
# What the edge multiplies: the row after Normalize.
row_scale = np.ones(len(users), np.float32)
if norm > 0:
    row_scale = (norm / np.sqrt(np.maximum(np.asarray(Xu.sum(1)).ravel(), 1))).astype(np.float32)
k = a.k
discounts = 1.0 / np.log2(np.arange(2, k + 2))
CHUNK = 2048  # users at once: Gowalla's [users, items] float matrices would take 5 GB each


def logits_of(first, last):
    rows = sparsenet.Dataset.from_scipy(Xu[first:last].astype(np.float32), name=name, boolean=True)
    return np.log(np.maximum(net.scores({name: rows}), 1e-30))


def sums(S, first, last):
    """Recall@k and NDCG@k summed over users [first, last) ranked by S."""
    S[Xu[first:last].nonzero()] = -np.inf
    top = np.argpartition(-S, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(S, top, axis=1), axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    recall = ndcg = 0.0
    for i, u in enumerate(users[first:last]):
        held = H.indices[H.indptr[u]:H.indptr[u + 1]]
        hit = np.isin(top[i], held)
        recall += hit.sum() / len(held)
        ndcg += (hit * discounts).sum() / discounts[:min(len(held), k)].sum()
    return np.array([recall, ndcg])


def report(row, total):
    row[f"recall@{k}"], row[f"ndcg@{k}"] = (total / len(users)).tolist()
    print(json.dumps(row), flush=True)
    return row


rows = []
total = sum(sums(logits_of(f, min(f + CHUNK, len(users))), f, min(f + CHUNK, len(users)))
            for f in range(0, len(users), CHUNK))
rows.append(report({"lambda": None, "scale": 0.0}, total))
scales = [float(x) for x in a.scales.split(",")]
if a.fit == "ease":
    points = [{"lambda": float(x)} for x in a.lambdas.split(",")]
else:
    points = [{"fit": "GraphFilter", "K": int(kk), "IdealWeight": float(w)}
              for kk in a.ks.split(",") for w in a.ideal_weights.split(",")]
for point in points:
    t0 = time.perf_counter()
    tag = f"ease-{point['lambda']:g}" if a.fit == "ease" else f"gf-{point['K']}-{point['IdealWeight']:g}"
    cached = os.path.join(a.cache, f"{tag}.npy") if a.cache else None
    if cached and os.path.exists(cached):
        B = np.load(cached, mmap_mode="r")
    else:
        if a.fit == "ease":
            import ease
            B = ease.ease_weights(X, point["lambda"])
        else:
            B = graph_filter_weights(X, point["K"], point["IdealWeight"])
        if cached:
            os.makedirs(a.cache, exist_ok=True)
            np.save(cached, B)
    fit = time.perf_counter() - t0
    totals = {s: np.zeros(2) for s in scales}
    for f in range(0, len(users), CHUNK):
        last = min(f + CHUNK, len(users))
        z = logits_of(f, last)
        path = np.asarray(Xu[f:last] @ B) * row_scale[f:last, None]
        for s in scales:
            totals[s] += sums(z + np.float32(s) * path, f, last)
    del B
    for s in scales:
        rows.append(report({**point, "scale": s, "fit_seconds": fit}, totals[s]))
best = max(rows, key=lambda x: x[f"recall@{k}"])
print(json.dumps({"best": best, "users": int(len(users)), "model": a.model}))

#!/usr/bin/env python3
"""The selection of a blend of linear paths beside an autoencoder, on validation users only
(docs/quality.md, "Two linear paths on one edge"): the weights of an inference-only edge whose
matrix is the sum of several FixedWeights fits (config-reference.md, `$.Layers[].FixedWeights`).

The network with such an edge ranks a user's items by  z + s * x' (sum_f Scale_f * B_f), z the
autoencoder's output logits (log SoftMax: a per-user constant apart, which no ranking sees), x'
the input row after the Input layer's Normalize (s = Scale / ||x||: Normalize's L2 scale over the
row's norm) and B_f each fit's matrix. Every term is linear in the fits' Scales, so the score
matrices of the validation users are computed once per fit ("bases"), kept on disk, and any
weighting of them is ranked in seconds ("grid"). Bases, each [validation users, items] float32:

  Z   the autoencoder's logits (--model, a network trained without the edge: with InTraining
      false the edge changes no training step); --model-basis Z2 stores another network's
      logits under another name (every basis named Z... is a network's logits), so networks of
      other seeds blend as an ensemble ({"Z": 0.5, "Z2": 0.5, ...}) and a network of the fixed
      edge alone (its logits: s x B) stands for the paths of its config
  E   x B_ease (--ease-lambda, benchmarks/peers/ease.py's fit, or --ease-matrix B.npy)
  S1  x P, P = R~^T R~, R~ = Du^-a X Di^-b (the GraphFilter fit's linear filter, K 0)
  I   x Di^-b V V^T Di^b, V the top --k right singular vectors of R~ (its ideal low-pass part)
  S2, S3  x P^2, x P^3 (--powers 3: BSPM's sharpening terms, x P - c x P^2 + ...)
  U   a user-based path (--user-based N): sum over the N training users v most like u of
      sim(u, v) r~_v, sim(u, v) = x_u Di^-b r~_v^T, r~_v the row of R~ (u's own row left out)

x is the stored row (0/1), or with --values the same entries with that file's values (a
recency-weighted input, `split fixed --recency`), the fits staying on the 0/1 rows unless
--fit-values (as the engine, which fits on the input dataset it trains on); each grid point is a JSON object of basis -> coefficient, for example
{"Z": 1, "E": 48, "S1": 48, "I": 4.8}, which is the network with EASE Scale 48 and GraphFilter
Scale 48, IdealWeight 0.1 (I's coefficient over S1's). Without a Z... basis the paths rank alone
(no row scaling: a per-user factor changes no ranking). With one, every basis not named Z... is
taken for a path's scores x B and multiplied by the row's scale s, and the logits are added
as they are. A basis key "B@g" takes basis B with column j divided by d_j^g (d_j: item j's
training interactions): a fit's PopularityExponent g; the key "popularity" subtracts its value
times log(1 + d_j) from every score (a logit adjustment). Recall@20 and NDCG@20 over the
validation users' held-out items, training items excluded, as `sparsenet evaluate` computes
them, and the mean popularity (training interactions) of the 20 items recommended
(mean_degree@20).

Cost on Gowalla (29,858 users, 40,981 items; 2-core VM): S1, S2, S3 and I 4 minutes (svds at
K 256: 46 s), 4.9 GB of disk each; Z and E about a minute once B is fitted (EASE at Lambda 100:
about 13 minutes in numpy, 6.7 GB); a grid point about 10 s.

usage: path_screen.py bases --train TRAIN_FIT.nc --heldout VALIDATION.nc --out DIR
           [--values WEIGHTED.nc [--fit-values]]
           [--model AE.nc [--model-basis Z]] [--ease-lambda L [--ease-save B.npy] | --ease-matrix B.npy]
           [--graph-filter] [--k 256] [--user-exponent 0.5] [--item-exponent 0.5] [--powers 1]
           [--user-based N]
       path_screen.py grid --train TRAIN_FIT.nc --heldout VALIDATION.nc --out DIR
           [--values WEIGHTED.nc] --grid GRID.json|'[{...}]' [--normalize-scale 4]
(run with PYTHONPATH=build/python and a Python with numpy and scipy, e.g. build/pyenv/bin/python)
"""
import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("stage", choices=["bases", "grid"])
p.add_argument("--train", required=True, help="the rows the paths and the autoencoder saw")
p.add_argument("--heldout", required=True, help="the validation users' held-out items")
p.add_argument("--values", default=None,
               help="score with this file's input values (the rows and items of --train, e.g. "
                    "weighted by recency); the fits stay on --train's 0/1 rows")
p.add_argument("--out", required=True, help="folder of the bases")
p.add_argument("--model", default=None, help="bases: the autoencoder, for Z")
p.add_argument("--model-basis", default="Z", help="bases: the name of --model's logits (Z...)")
p.add_argument("--ease-lambda", type=float, default=None, help="bases: E from an EASE fit")
p.add_argument("--fit-values", action="store_true",
               help="bases: fit on --values too (as the engine fits on the input dataset's "
                    "values), not on --train's 0/1 rows")
p.add_argument("--ease-matrix", default=None, help="bases: E from this fitted B (.npy)")
p.add_argument("--ease-save", default=None, help="bases: also save the fitted B (.npy)")
p.add_argument("--graph-filter", action="store_true", help="bases: S1 and I")
p.add_argument("--k", type=int, default=256)
p.add_argument("--user-exponent", type=float, default=0.5)
p.add_argument("--item-exponent", type=float, default=0.5)
p.add_argument("--user-based", type=int, default=0, metavar="NEIGHBOURS",
               help="bases: U, a user-based path over this many nearest users")
p.add_argument("--powers", type=int, default=1, choices=[1, 2, 3], help="bases: S2 (2), S3 (3)")
p.add_argument("--grid", default=None, help="grid: a JSON list of points, or a file of one")
p.add_argument("--normalize-scale", type=float, default=4.0, help="the Input layer's Normalize")
p.add_argument("--chunk", type=int, default=4096, help="users at once")
p.add_argument("--threads", type=int, default=2)
a = p.parse_args()
if not a.model_basis.startswith("Z"):
    p.error(f"--model-basis {a.model_basis}: expected a name starting with Z (a network's logits)")
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import sparsenet  # noqa: E402


def read_csr(path):
    """The first dataset of a netCDF file, binary, as scipy CSR float32."""
    m = sparsenet.Dataset.load(path).to_scipy()
    m.data[:] = 1.0
    return sp.csr_matrix(m, dtype=np.float32)


X = read_csr(a.train)
H = read_csr(a.heldout)
users = np.flatnonzero(np.diff(H.indptr) > 0)
Xu = X[users]
if a.values:  # the scored rows: the same entries as X, other values
    Xv = sp.csr_matrix(sparsenet.Dataset.load(a.values).to_scipy(), dtype=np.float32)
    if Xv.shape != X.shape or (Xv != 0).astype(np.int8).nnz != X.nnz or \
            abs(Xv.astype(bool).astype(np.int8) - X.astype(bool).astype(np.int8)).nnz:
        sys.exit(f"--values {a.values}: expected the rows and items of --train {a.train}")
    Xu = Xv[users]
elif a.fit_values:
    sys.exit("--fit-values: needs --values")
n = X.shape[1]
chunks = [(f, min(f + a.chunk, len(users))) for f in range(0, len(users), a.chunk)]
t0 = time.perf_counter()


def save(name, i, m):
    np.save(os.path.join(a.out, f"{name}-{i}.npy"), np.ascontiguousarray(m, dtype=np.float32))


def bases():
    os.makedirs(a.out, exist_ok=True)
    F = Xv if a.fit_values else X  # the rows the fits see
    du, di = np.asarray(F.sum(1)).ravel(), np.asarray(F.sum(0)).ravel()
    ru = np.where(du > 0, np.power(np.maximum(du, 1e-30), -a.user_exponent), 0).astype(np.float32)
    ci = np.where(di > 0, np.power(np.maximum(di, 1e-30), -a.item_exponent), 0).astype(np.float32)
    R = sp.csr_matrix(sp.diags(ru) @ F @ sp.diags(ci), dtype=np.float32)  # R~ [users, items]
    Rt = sp.csr_matrix(R.T)
    V = None
    if a.graph_filter and a.k > 0:
        import scipy.sparse.linalg as sla
        _, _, vt = sla.svds(R.astype(np.float64), k=a.k, random_state=0)
        V = vt.T.astype(np.float32)
        print(f"svds, K {a.k}: {time.perf_counter() - t0:.0f} s", flush=True)
    inv = np.where(ci > 0, 1.0 / np.maximum(ci, 1e-30), 0.0).astype(np.float32)
    B = None
    if a.ease_matrix:
        B = np.load(a.ease_matrix, mmap_mode="r")
    elif a.ease_lambda:
        import ease
        B = ease.ease_weights(F, a.ease_lambda)
        print(f"EASE fit, Lambda {a.ease_lambda:g}: {time.perf_counter() - t0:.0f} s", flush=True)
        if a.ease_save:
            np.save(a.ease_save, B)
    net = sparsenet.Network.load(a.model, threads=a.threads) if a.model else None
    if net is not None:
        name = [x for x in net.config["Layers"] if x.get("Kind") == "Input"][0]["DataSet"]

    def times_p(S):  # S P = (S R~^T) R~ through the sparse R~: no [items, items] matrix
        T = np.asarray((R @ S.T).T)
        return np.asarray((Rt @ T.T).T)

    for i, (f, last) in enumerate(chunks):
        x = Xu[f:last]
        done = []
        if a.graph_filter:
            S = np.asarray((Rt @ (x @ Rt).toarray().T).T)  # x P
            save("S1", i, S)
            for power in range(2, a.powers + 1):
                S = times_p(S)
                save(f"S{power}", i, S)
            if V is not None:
                save("I", i, ((x @ sp.diags(ci)) @ V) @ (V.T * inv[None, :]))
            done.append("S1..I")
        if a.user_based:  # U: sum over the nearest training users v of sim(u, v) x_v
            sim = (x @ sp.diags(ci) @ Rt).toarray()  # x Di^-b R~^T: [chunk, users]
            sim[np.arange(last - f), users[f:last]] = 0  # not the user's own row
            keep = np.argpartition(-sim, a.user_based, axis=1)[:, :a.user_based]
            rows = np.repeat(np.arange(last - f), a.user_based)
            near = sp.csr_matrix((np.take_along_axis(sim, keep, 1).ravel(),
                                  (rows, keep.ravel())), shape=sim.shape)
            save("U", i, np.asarray((near @ R).todense()))  # weighted rows of R~
            done.append("U")
        if B is not None:
            save("E", i, x @ B)
            done.append("E")
        if net is not None:
            rows = sparsenet.Dataset.from_scipy(x, name=name, boolean=not a.values)
            save(a.model_basis, i, np.log(np.maximum(net.scores({name: rows}), 1e-30)))
            done.append(a.model_basis)
        print(f"users {f}-{last}: {' '.join(done)}, {time.perf_counter() - t0:.0f} s", flush=True)


def grid():
    text = a.grid if a.grid.lstrip().startswith("[") else open(a.grid).read()
    points = json.loads(text)
    k = 20
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.cumsum(discounts)
    totals = np.zeros((len(points), 3))
    degree = np.asarray(X.sum(0)).ravel()  # an item's training interactions: its popularity
    log_degree = np.log1p(degree).astype(np.float32)

    def basis_of(key):  # "S1@0.2": basis S1 with its columns times degree^-0.2
        return key.split("@")[0]

    def column_scaled(basis, key):
        if "@" not in key:
            return basis
        e = float(key.split("@")[1])
        return basis * np.power(np.maximum(degree, 1.0), -e).astype(np.float32)[None, :]
    for i, (f, last) in enumerate(chunks):
        x = Xu[f:last]
        held = H[users[f:last]]
        dense_held = held.toarray() > 0
        held_count = np.asarray(held.sum(1)).ravel()
        norm = np.sqrt(np.asarray(x.multiply(x).sum(1)).ravel())  # ||x||, 0/1 or --values
        row_scale = a.normalize_scale / np.maximum(norm, 1e-30)
        seen = x.nonzero()
        names = sorted({basis_of(b) for point in points for b in point if b != "popularity"})
        m = {b: np.load(os.path.join(a.out, f"{b}-{i}.npy"), mmap_mode="r") for b in names}
        for j, point in enumerate(points):
            S = np.zeros((last - f, n), np.float32)
            logits = [b for b in point if b.startswith("Z")]
            for b, c in point.items():
                if b not in logits and b != "popularity" and c != 0:
                    S += np.float32(c) * column_scaled(m[basis_of(b)], b)
            if logits:  # the edge multiplies the normalised row; the logits are added
                S *= row_scale.astype(np.float32)[:, None]
                for b in logits:
                    S += np.float32(point[b]) * column_scaled(m[basis_of(b)], b)
            if point.get("popularity"):  # a logit adjustment: - g log(1 + degree)
                S -= np.float32(point["popularity"]) * log_degree[None, :]
            S[seen] = -np.inf
            top = np.argpartition(-S, k, axis=1)[:, :k]
            order = np.argsort(-np.take_along_axis(S, top, axis=1), axis=1, kind="stable")
            top = np.take_along_axis(top, order, axis=1)
            hit = np.take_along_axis(dense_held, top, axis=1)
            totals[j, 0] += (hit.sum(1) / held_count).sum()
            totals[j, 1] += ((hit * discounts).sum(1) /
                             ideal[np.minimum(held_count, k).astype(int) - 1]).sum()
            totals[j, 2] += degree[top].mean(1).sum()
        print(f"users {f}-{last}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = [{"point": point, "recall@20": totals[j, 0] / len(users),
             "ndcg@20": totals[j, 1] / len(users), "mean_degree@20": totals[j, 2] / len(users)}
            for j, point in enumerate(points)]
    for r in rows:
        print(json.dumps(r), flush=True)
    print(json.dumps({"best": max(rows, key=lambda r: r["recall@20"]), "users": int(len(users))}))


bases() if a.stage == "bases" else grid()

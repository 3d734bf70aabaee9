#!/usr/bin/env python3
"""EASE^R (Steck, WWW 2019) in numpy/scipy: the closed-form item-item model, the quality-per-second
reference of ../shared/design/performance.md and the independent check of `sparsenet evaluate`.

    G = X^T X + lambda I,  P = G^-1,  B = I - P / diag(P)  (so diag(B) = 0),  scores = X B

X is the binary user x item matrix of --train (a netCDF file written by `sparsenet convert` or
`sparsenet split`, read with netCDF4, first dataset unless --dataset). G is inverted in float32
(Cholesky: LAPACK spotrf + spotri; by 2 x 2 blocks above 23,170 items), so Gowalla's 40,981 items
need about 15 GB at the peak.

For every user with held-out items: score all items, remove the user's train items, take the top
--k, and write them in DSSTNE's recs format (`user<TAB>item,score:item,score:...`, names from
the index files), which `sparsenet evaluate --recs` scores. The script also computes Recall@K and
NDCG@K itself in numpy (protocol A: hits / |held-out|; ideal DCG over min(K, |held-out|)
positions), an independent implementation to compare with. Prints one JSON line.

usage: ease.py --train TRAIN.nc --heldout TEST.nc --lambda L [--k 20] [--recs FILE]
       [--users-index users.index --items-index items.index] [--threads 2]
"""
import argparse
import json
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--heldout", required=True)
    p.add_argument("--dataset", default=None, help="dataset name in --train (default: the first)")
    p.add_argument("--lambda", dest="lam", type=float, required=True)
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--recs", default=None, help="recommendations file to write")
    p.add_argument("--users-index", default=None)
    p.add_argument("--items-index", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunk", type=int, default=2048, help="users scored at once")
    return p.parse_args()


if __name__ == "__main__":
    a = parse_args()
    # BLAS threads must be set before numpy loads its BLAS (an importer, such as
    # benchmarks/quality/blend_screen.py, sets them itself).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))

import netCDF4  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy.linalg import lapack  # noqa: E402


def read_csr(path, name=None):
    """The binary CSR matrix of one dataset of a sparsenet/DSSTNE netCDF file."""
    with netCDF4.Dataset(path) as nc:
        names = [nc.getncattr(f"name{i}") for i in range(int(nc.datasets))]
        n = 0 if name is None else names.index(name)
        start = np.asarray(nc.variables[f"sparseStart{n}"][:], dtype=np.int64)
        end = np.asarray(nc.variables[f"sparseEnd{n}"][:], dtype=np.int64)
        index = np.asarray(nc.variables[f"sparseIndex{n}"][:], dtype=np.int32)
        width = int(nc.getncattr(f"width{n}"))
    if not np.all(start[1:] == end[:-1]):
        sys.exit(f"{path}: rows are not stored contiguously")
    offsets = np.concatenate([start[:1], end])
    data = np.ones(len(index), dtype=np.float32)
    return sp.csr_matrix((data, index, offsets), shape=(len(start), width))


def read_index(path, count):
    """Names by index from a 'label<TAB>index' file; row numbers when there is none."""
    if path is None:
        return [str(i) for i in range(count)]
    names = [None] * count
    for line in open(path):
        label, idx = line.rstrip("\n").split("\t")
        if int(idx) < count:
            names[int(idx)] = label
    return names


def spd_inverse(M):
    """Inverse of a symmetric positive definite float32 matrix (Fortran order, overwritten):
    LAPACK spotrf + spotri, then the triangle they leave mirrored. Returns a C-order array."""
    c, info = lapack.spotrf(M, lower=0, overwrite_a=1, clean=0)
    if info != 0:
        sys.exit(f"spotrf failed: info {info}")
    P, info = lapack.spotri(c, lower=0, overwrite_c=1)
    if info != 0:
        sys.exit(f"spotri failed: info {info}")
    # spotri wrote the upper triangle of the Fortran array, the lower triangle of its transpose
    # (a C-order view of the same symmetric matrix); mirror it into the other half by blocks.
    P = P.T
    n, block = P.shape[0], 4096
    for i in range(0, n, block):
        j = min(n, i + block)
        P[i:j, j:] = P[j:, i:j].T
        upper = np.triu_indices(j - i, 1)
        tile = P[i:j, i:j]
        tile[upper] = tile.T[upper]
    return P


# scipy's LAPACK wrappers use 32-bit integers, and spotrf crashes on matrices of 2^30 elements
# or more (32,768^2; Gowalla has 40,981 items): larger matrices are inverted by 2 x 2 blocks.
DIRECT_LIMIT = 2**29


def ease_weights(X, lam):
    """B = I - P / diag(P) with P = (X^T X + lam I)^-1, in float32."""
    items = X.shape[1]
    gram = (X.T @ X).astype(np.float32).tocsr() + sp.identity(items, np.float32, "csr") * lam
    if items * items < DIRECT_LIMIT:
        P = spd_inverse(gram.toarray(order="F"))
    else:
        # [[A, C], [C^T, D]]^-1 = [[A^-1 + T S^-1 T^T, -T S^-1], [., S^-1]],
        # T = A^-1 C, S = D - C^T T (the Schur complement).
        h = items // 2
        Ainv = spd_inverse(gram[:h, :h].toarray(order="F"))
        C = gram[:h, h:].toarray()
        T = Ainv @ C
        S = gram[h:, h:].toarray() - C.T @ T
        del C
        Sinv = spd_inverse(np.asfortranarray(S))
        del S
        P = np.empty((items, items), dtype=np.float32)
        P12 = -(T @ Sinv)
        P[:h, h:] = P12
        P[h:, :h] = P12.T
        P[h:, h:] = Sinv
        del Sinv
        P[:h, :h] = Ainv - P12 @ T.T
        del Ainv, T, P12
    d = np.diag(P).copy()
    P /= -d[np.newaxis, :]
    P[np.diag_indices(items)] = 0.0
    return P


def main():
    t0 = time.perf_counter()
    X = read_csr(a.train, a.dataset)
    H = read_csr(a.heldout)
    if H.shape[0] != X.shape[0]:
        sys.exit(f"{a.heldout}: {H.shape[0]} rows; {a.train} has {X.shape[0]}")
    items = X.shape[1]
    if H.shape[1] > items:
        sys.exit(f"{a.heldout}: {H.shape[1]} columns; {a.train} has {items}")
    t_read = time.perf_counter() - t0

    t0 = time.perf_counter()
    B = ease_weights(X, a.lam)
    t_fit = time.perf_counter() - t0

    t0 = time.perf_counter()
    users = np.flatnonzero(np.diff(H.indptr) > 0)
    user_names = read_index(a.users_index, X.shape[0])
    item_names = read_index(a.items_index, items)
    out = open(a.recs + ".tmp", "w") if a.recs else None
    k = a.k
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    recall_sum = ndcg_sum = 0.0
    for first in range(0, len(users), a.chunk):
        rows = users[first:first + a.chunk]
        Xc = X[rows]
        S = np.asarray(Xc @ B)  # [chunk, items]
        S[Xc.nonzero()] = -np.inf  # the user's train items are never recommended
        top = np.argpartition(-S, k, axis=1)[:, :k]
        top_scores = np.take_along_axis(S, top, axis=1)
        order = np.lexsort((top, -top_scores), axis=1)  # score descending, then lower item
        top = np.take_along_axis(top, order, axis=1)
        top_scores = np.take_along_axis(top_scores, order, axis=1)
        for i, u in enumerate(rows):
            held = H.indices[H.indptr[u]:H.indptr[u + 1]]
            hit = np.isin(top[i], held)
            recall_sum += hit.sum() / len(held)
            ndcg_sum += (hit * discounts).sum() / discounts[:min(len(held), k)].sum()
            if out:
                out.write(user_names[u] + "\t" + ":".join(
                    f"{item_names[j]},{s:.6g}" for j, s in zip(top[i], top_scores[i])) + "\n")
    if out:
        out.close()
        os.replace(a.recs + ".tmp", a.recs)
    t_score = time.perf_counter() - t0
    print(json.dumps({
        "system": "ease-numpy", "lambda": a.lam, "k": k, "users": int(len(users)),
        "items": int(items), f"recall@{k}": recall_sum / len(users),
        f"ndcg@{k}": ndcg_sum / len(users), "seconds_read": t_read, "seconds_fit": t_fit,
        "seconds_score": t_score, "threads": a.threads, "numpy": np.__version__}))


if __name__ == "__main__":
    main()

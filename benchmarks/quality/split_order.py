#!/usr/bin/env python3
"""Does a published split hold out each user's *later* items, and does train.txt list a user's
items in time order? (docs/quality.md, "Gowalla's split is temporal"). Reads the text files
only (`user item item ...` per line) and prints:

  lean      mean popularity (interactions in train.txt) of the test items and of slices of each
            train line (first 10 %, last 10 %, a random 10 %, by tenths of the line), over that
            of all train interactions. A per-user random split puts the test items at about 1.0.
  affinity  for 3,000 users drawn with a fixed seed: the mean cosine similarity (item columns of
            train.txt, the user's own row left out) between the user's test items and the
            first / last / a random fifth of the user's train line, and the same with another
            user's test items (the null: what popularity alone gives). When the last fifth is
            closer than the first for the user's own test items but not for another user's, the
            line is in time order and the test items follow it.

  ids       item ids in both releases were given in order of first appearance along train.txt
            (user 0's line holds 0, 1, 2, ...), so a higher id is an item first seen in a later
            user's line. How often a test item's id exceeds a train item's of the same user, over
            all pairs and within twentieths of log popularity (0.5 when ids carry nothing beyond
            popularity), and the mean rank correlation of each train line's order with its ids
            (1.0 for a sorted line).

  recency   with --recency TAUS: 10 % of each train line held out, either its last items or a
            random draw (numpy, seed 1), and 6,000 users' remaining items, weighted by
            exp(-age / tau) (age: the user's items listed after it; no weighting first), ranked
            by GF-CF's linear filter x P (P = R~^T R~, R~ = Du^-1/2 X Di^-1/2 of the kept items):
            Recall@20 on the held-out items. Recency helps a temporal hold-out and hurts a random
            one.

usage: split_order.py DATA_DIR [--recency 100,30,10,5]
       (DATA_DIR holding train.txt and test.txt, e.g. ../shared/data/gowalla)
(numpy and scipy: build/pyenv/bin/python)
"""
import os
import sys

import numpy as np
import scipy.sparse as sp

if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--recency"):
    sys.exit(__doc__)
folder = sys.argv[1]
taus = [float(t) for t in sys.argv[3].split(",")] if len(sys.argv) == 4 else []


def lines(name):
    path = os.path.join(folder, name)
    with open(path) as f:
        return [[int(t) for t in line.split()[1:]] for line in f]


train, test = lines("train.txt"), lines("test.txt")
users = len(train)
items = 1 + max(max(x) for x in train if x)
pop = np.zeros(items)
for x in train:
    pop[x] += 1


def lean(rows):
    values = [pop[x] for x in rows if len(x)]
    return np.concatenate(values).mean() / base


base = np.concatenate([pop[x] for x in train if x]).mean()
rng = np.random.default_rng(1)
tenth = [max(1, len(x) // 10) for x in train]
print(f"lean     test {lean(test):.3f}  first 10% {lean([x[:k] for x, k in zip(train, tenth)]):.3f}"
      f"  last 10% {lean([x[-k:] for x, k in zip(train, tenth)]):.3f}  random 10% "
      f"{lean([rng.choice(x, k, replace=False) for x, k in zip(train, tenth)]):.3f}")
deciles = [lean([x[len(x) * d // 10:max(len(x) * (d + 1) // 10, len(x) * d // 10 + 1)]
                 for x in train]) for d in range(10)]
print("lean     by tenths of the train line: " + " ".join(f"{v:.3f}" for v in deciles))

bins = np.digitize(np.log(np.maximum(pop, 1)),
                   np.quantile(np.log(np.maximum(pop, 1)), np.linspace(0, 1, 21))[1:-1])
above = np.zeros(4)  # pairs with the test id higher, all pairs; the same within a popularity bin
for x, t in zip(train, test):
    x, t = np.array(x), np.array(t)
    higher, same = t[:, None] > x[None, :], bins[t][:, None] == bins[x][None, :]
    above += [higher.sum(), higher.size, (higher & same).sum(), same.sum()]
order = np.mean([np.corrcoef(np.argsort(np.argsort(x)), np.arange(len(x)))[0, 1]
                 for x in train if len(x) > 5 and len(set(x)) == len(x)])
print(f"ids      test id above train id {above[0] / above[1]:.3f}  within a popularity bin "
      f"{above[2] / above[3]:.3f}  line order vs id rank {order:.3f}")

rows = np.repeat(np.arange(users), [len(x) for x in train])
X = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, np.concatenate(train))),
                  shape=(users, items))
degree = np.asarray(X.sum(0)).ravel()
C = sp.csc_matrix(X @ sp.diags(1 / np.sqrt(np.maximum(degree, 1))))  # unit-free item columns
drawn = rng.choice(users, 3000, replace=False)
sums = {k: [] for k in ("first", "last", "random", "first/null", "last/null", "random/null")}
for u in drawn:
    x = train[u]
    k = max(1, len(x) // 5)
    parts = {"first": x[:k], "last": x[-k:], "random": list(rng.choice(x, k, replace=False))}
    other = test[rng.integers(users)]
    for name, part in parts.items():
        B = C[:, part]
        own = (C[:, test[u]].T @ B).toarray() - np.outer(C[u, test[u]].toarray(),
                                                         C[u, part].toarray())
        sums[name].append(own.mean())
        sums[name + "/null"].append((C[:, other].T @ B).toarray().mean())
print("affinity own test items:     " +
      "  ".join(f"{k} {np.mean(sums[k]):.5f}" for k in ("first", "last", "random")))
print("affinity another user's:     " +
      "  ".join(f"{k} {np.mean(sums[k + '/null']):.5f}" for k in ("first", "last", "random")))


def recency(kind):
    draw = np.random.default_rng(1)
    fit, held = [], []
    for x in train:
        k = int(round(0.1 * len(x)))
        if kind == "last":
            fit.append(x[:len(x) - k])
            held.append(x[len(x) - k:])
        else:
            out = set(draw.choice(len(x), k, replace=False).tolist()) if k else set()
            fit.append([i for j, i in enumerate(x) if j not in out])
            held.append([i for j, i in enumerate(x) if j in out])

    def csr(rows, values=None):
        r = np.repeat(np.arange(len(rows)), [len(x) for x in rows])
        v = np.ones(len(r), np.float32) if values is None else np.concatenate(values)
        return sp.csr_matrix((v.astype(np.float32), (r, np.concatenate(rows))),
                             shape=(len(rows), items))

    F = csr(fit)
    du, di = np.asarray(F.sum(1)).ravel(), np.asarray(F.sum(0)).ravel()
    Di = sp.diags(1 / np.sqrt(np.maximum(di, 1)))
    R = sp.csr_matrix(sp.diags(1 / np.sqrt(np.maximum(du, 1))) @ F @ Di, dtype=np.float32)
    Rt = sp.csr_matrix(R.T)
    scored = np.array([u for u in draw.choice(users, 6000, replace=False) if held[u]])
    line = []
    for tau in [None] + taus:
        w = [np.ones(len(fit[u])) if tau is None else
             np.exp(-(len(fit[u]) - 1 - np.arange(len(fit[u]))) / tau) for u in scored]
        Xw = csr([fit[u] for u in scored], w)
        S = np.asarray(((Xw @ Di) @ Rt @ R).todense())
        S[Xw.nonzero()] = -np.inf
        top = np.argpartition(-S, 20, axis=1)[:, :20]
        recall = np.mean([len(set(top[i].tolist()) & set(held[u])) / len(held[u])
                          for i, u in enumerate(scored)])
        line.append(f"{'none' if tau is None else f'{tau:g}'} {recall:.4f}")
    print(f"recency  hold-out of the {kind} 10%, Recall@20 by tau: " + "  ".join(line), flush=True)


if taus:
    recency("last")
    recency("random")

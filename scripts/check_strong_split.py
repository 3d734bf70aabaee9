#!/usr/bin/env python3
"""Cross-checks `sparsenet split strong` against the reference preprocessing of dawenl/vae_cf.

Re-implements the notebook's steps (pandas + numpy's legacy np.random stream, as in
../shared/reference/anchors.md section 1.2) on a ratings file and compares every output
matrix of sparsenet, cell by cell, by user and item labels. Needs numpy, pandas and netCDF4
(pip install numpy pandas netCDF4); not part of `make test`.

usage: scripts/check_strong_split.py RATINGS SPARSENET_OUT_DIR [--heldout-users N]
       [--min-rating R] [--sep ,] [--seed 98765]
"""
import argparse
import os
import sys

import netCDF4
import numpy as np
import pandas as pd


def reference(ratings, heldout_users, min_rating, seed):
    raw = ratings[ratings["rating"] >= min_rating]
    count = raw.groupby("userId").size()
    raw = raw[raw["userId"].isin(count.index[count >= 5])]
    unique_uid = raw.groupby("userId").size().index
    np.random.seed(seed)
    unique_uid = unique_uid[np.random.permutation(unique_uid.size)]
    n = unique_uid.size
    tr_users = unique_uid[: n - heldout_users * 2]
    vd_users = unique_uid[n - heldout_users * 2 : n - heldout_users]
    te_users = unique_uid[n - heldout_users :]
    train_plays = raw.loc[raw["userId"].isin(tr_users)]
    unique_sid = pd.unique(train_plays["movieId"])

    def split(data):
        grouped = data.groupby("userId")
        tr, te = [], []
        np.random.seed(seed)
        for _, group in grouped:
            k = len(group)
            if k >= 5:
                idx = np.zeros(k, dtype="bool")
                idx[np.random.choice(k, size=int(0.2 * k), replace=False).astype("int64")] = True
                tr.append(group[np.logical_not(idx)])
                te.append(group[idx])
            else:
                tr.append(group)
        return pd.concat(tr), pd.concat(te)

    out = {"train.nc": train_plays, "items": list(unique_sid)}
    for name, users in (("validation", vd_users), ("test", te_users)):
        plays = raw.loc[raw["userId"].isin(users)]
        plays = plays.loc[plays["movieId"].isin(unique_sid)]
        out[name + "_fold_in.nc"], out[name + "_heldout.nc"] = split(plays)
    out["users"] = {"train": list(tr_users), "validation": list(vd_users), "test": list(te_users)}
    return out


def read_index(path):
    labels = {}
    with open(path) as f:
        for line in f:
            label, index = line.rstrip("\n").split("\t")
            labels[int(index)] = label
    return [labels[i] for i in range(len(labels))]


def read_pairs(path, users, items):
    with netCDF4.Dataset(path) as nc:
        start = nc.variables["sparseStart0"][:]
        end = nc.variables["sparseEnd0"][:]
        index = nc.variables["sparseIndex0"][:]
    pairs = set()
    for r in range(len(start)):
        for k in range(start[r], end[r]):
            pairs.add((users[r], items[index[k]]))
    return pairs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ratings")
    p.add_argument("out_dir")
    p.add_argument("--heldout-users", type=int, default=10000)
    p.add_argument("--min-rating", type=float, default=3.5 + 1e-9)
    p.add_argument("--sep", default=None)
    p.add_argument("--seed", type=int, default=98765)
    a = p.parse_args()
    if a.sep is None:
        a.sep = "\t" if not a.ratings.endswith(".csv") else ","
    names = ["userId", "movieId", "rating", "timestamp"]
    header = 0 if a.ratings.endswith(".csv") else None
    ratings = pd.read_csv(a.ratings, sep=a.sep, header=header, names=names)
    ref = reference(ratings, a.heldout_users, a.min_rating, a.seed)

    items = read_index(os.path.join(a.out_dir, "items.index"))
    failures = 0
    if items != [str(i) for i in ref["items"]]:
        print("items.index differs from unique_sid")
        failures += 1
    for role in ("train", "validation", "test"):
        users = read_index(os.path.join(a.out_dir, role + "_users.index"))
        if users != [str(u) for u in ref["users"][role]]:
            print(role + "_users.index differs from the permuted user ids")
            failures += 1
    for name in ("train.nc", "validation_fold_in.nc", "validation_heldout.nc",
                 "test_fold_in.nc", "test_heldout.nc"):
        role = name.split("_")[0].split(".")[0]
        users = read_index(os.path.join(a.out_dir, role + "_users.index"))
        ours = read_pairs(os.path.join(a.out_dir, name), users, items)
        theirs = {(str(u), str(i)) for u, i in zip(ref[name]["userId"], ref[name]["movieId"])}
        status = "same" if ours == theirs else "DIFFERENT"
        print(f"{name:24s} sparsenet {len(ours):9d} pairs, reference {len(theirs):9d}: {status}")
        failures += ours != theirs
    print("all outputs identical to the reference" if failures == 0 else f"{failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Request bodies of benchmarks/serve/run.sh: the workload of benchmarks/library (queries of 80 to
120 distinct items of 27,278, drawn with Zipf popularity rank^-1, top-10, the query's items
excluded), one JSON body per line. Writes DIR/single.txt (2048 POST /recommend bodies) and
DIR/batch.txt (POST /recommend/batch bodies of BATCH queries each, default 64)."""

import bisect
import itertools
import json
import os
import random
import sys

ITEMS, QUERIES = 27278, 2048
BATCH = int(os.environ.get("BATCH", "64"))


def main():
    out = sys.argv[1]
    rng = random.Random(2026)
    cumulative = list(itertools.accumulate(1.0 / (i + 1) for i in range(ITEMS)))
    total = cumulative[-1]
    queries = []
    for _ in range(QUERIES):
        length = 80 + rng.randrange(41)
        items = set()
        while len(items) < length:
            items.add(min(bisect.bisect_left(cumulative, rng.random() * total), ITEMS - 1))
        queries.append({"items": sorted(items), "k": 10})
    with open(f"{out}/single.txt", "w") as f:
        for q in queries:
            f.write(json.dumps(q, separators=(",", ":")) + "\n")
    with open(f"{out}/batch.txt", "w") as f:
        for b in range(0, QUERIES, BATCH):
            f.write(json.dumps(queries[b:b + BATCH], separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark driver: runs a workload for sparsenet and for each peer alternately, repeats, and
prints a table of medians and ratios; writes benchmarks/results/<date>-<machine>-<workload>.json.

Workloads (../shared/design/performance.md):
  dsstne-bench  DSSTNE's benchmark network (its config, unmodified) on the ML-20M shape; a user
                subset of --users users (same mean row length, 144.4) keeps a run short.

Peers (benchmarks/peers/): PyTorch, competent (sparse first layer) and densify-each-batch.
Each system trains --epochs epochs; the figure is the time of the epoch loop as the system
reports it (sparsenet: --metrics-out; peers: their own timer), so process start and data loading
are excluded for everyone.

usage: benchmarks/bench.py [--build build] [--python PY] [--workload dsstne-bench]
       [--users 8192] [--repeats 3] [--threads 2] [--batch 256] [--no-peers]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "..", "shared", "reference", "dsstne-configs")
ITEMS, USERS, NNZ = 27278, 138493, 20000263


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def flops_per_example(cfg_path, items, mean_nnz):
    """Multiply-adds x 2 of forward + backward (dX and dW) per example."""
    cfg = json.load(open(cfg_path))
    sizes = [int(l["N"]) if l["N"] != "auto" else items for l in cfg["Layers"]]
    total = 0.0
    for i in range(1, len(sizes)):
        if i == 1:  # sparse input: gather forward, scatter gradient; no input delta
            total += 2 * 2 * mean_nnz * sizes[1]
        else:
            total += 3 * 2 * sizes[i - 1] * sizes[i]
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.join(ROOT, "benchmarks", ".venv", "bin", "python"))
    p.add_argument("--workload", default="dsstne-bench", choices=["dsstne-bench"])
    p.add_argument("--users", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "sparsenet-bench"))
    p.add_argument("--no-peers", action="store_true")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sparsenet = os.path.join(a.build, "sparsenet")
    config = os.path.join(CONFIGS, "benchmarks_dsstne_config.json")
    nnz = round(NNZ / USERS * a.users)
    data = os.path.join(a.work, f"dsstne-bench-{a.users}.nc")
    if not os.path.exists(data):
        run([sparsenet, "generate", "-o", data, "--users", str(a.users), "--items", str(ITEMS),
             "--nnz", str(nnz), "--seed", "1", "-q"])
    info = json.loads(run([sparsenet, "info", "--json", data]))
    ds = info["files"][0]["datasets"][0]
    examples, mean_nnz = ds["examples"], ds["nonzeros"] / ds["examples"]

    def ours():
        metrics = os.path.join(a.work, "metrics.jsonl")
        run([sparsenet, "train", "-c", config, "-i", data, "-n", os.path.join(a.work, "m.nc"),
             "-b", str(a.batch), "-e", str(a.epochs), "--threads", str(a.threads),
             "--metrics-out", metrics, "-q"])
        return [json.loads(l)["seconds"] for l in open(metrics)]

    def peer(variant):
        def go():
            out = run([a.python, os.path.join(ROOT, "benchmarks", "peers", "torch_autoencoder.py"),
                       "--config", config, "--data", data, "--variant", variant,
                       "--batch", str(a.batch), "--epochs", str(a.epochs),
                       "--threads", str(a.threads)])
            return json.loads(out.strip().splitlines()[-1])["seconds"]
        return go

    systems = {"sparsenet": ours}
    versions = {"sparsenet": run([sparsenet, "--version"]).strip()}
    if not a.no_peers:
        if not os.path.exists(a.python):
            sys.exit(f"{a.python} not found: run `make bench` (it creates the venv) or --no-peers")
        systems["pytorch-sparse"] = peer("sparse")
        systems["pytorch-densify"] = peer("densify")
        versions["torch"] = run([a.python, "-c", "import torch; print(torch.__version__)"]).strip()

    times = {name: [] for name in systems}
    for r in range(a.repeats):  # alternate systems within each repetition
        for name, go in systems.items():
            epoch_seconds = go()
            times[name].append(statistics.median(epoch_seconds))
            print(f"  repeat {r + 1}/{a.repeats} {name:16s} {times[name][-1]:.2f} s/epoch",
                  flush=True)

    flop = flops_per_example(config, ITEMS, mean_nnz) * examples
    base = statistics.median(times["sparsenet"])
    rows = []
    print(f"\n{a.workload}: {examples} users x {ITEMS} items ({mean_nnz:.1f} per user), batch "
          f"{a.batch}, {a.threads} threads, {cpu_model()}; median of {a.repeats}")
    print(f"{'system':18s} {'s/epoch':>8s} {'users/s':>9s} {'GFLOP/s':>8s} {'sparsenet speedup':>18s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({"system": name, "seconds": ts, "median_s": med, "users_per_s": examples / med,
                     "gflops": flop / med / 1e9, "sparsenet_speedup": med / base})
        print(f"{name:18s} {med:8.2f} {examples / med:9.0f} {flop / med / 1e9:8.1f} "
              f"{med / base:17.2f}x")
    result = {
        "benchmark": a.workload, "date": datetime.date.today().isoformat(),
        "machine": platform.node(), "cpu": cpu_model(), "threads": a.threads,
        "versions": versions,
        "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip(),
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "workload": {"users": examples, "items": ITEMS, "mean_row": mean_nnz, "batch": a.batch,
                     "epochs": a.epochs, "config": "benchmarks_dsstne_config.json",
                     "flop_per_epoch": flop},
        "results": rows,
    }
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    path = os.path.join(ROOT, "benchmarks", "results",
                        f"{result['date']}-{platform.node()}-{a.workload}.json")
    json.dump(result, open(path, "w"), indent=2)
    print("wrote", os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()

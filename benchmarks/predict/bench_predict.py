#!/usr/bin/env python3
"""predict end to end at the ML-20M shape, two builds side by side (docs/benchmarks.md, "predict").

The work: `sparsenet predict -n MODEL --input DATA -k 100 -s FILE --timings` for every user of
the ML-20M shape (138,493 users x 27,278 items, 20,000,263 interactions, `sparsenet generate
--seed 1`), the users' own items excluded, with each build given (--build, and --base: an older
build, for example main at a past commit built in its own worktree). Runs alternate between the
builds (base, new, base, new, ...) so that load on the machine hits both alike; their recs
files must be identical byte for byte. Reported per build and run: the phases that --timings
prints (load, score, top_k, write, total; builds before issue 34 print load, top_k = score +
top_k, and write) and the process's wall time; then the medians and each phase's base / new.
The new build also writes --output-format npz once (its write phase is recorded).

Model: the network of --config (default configs/dsstne-bench.json: three hidden layers of
1,024 and a 27,278-wide sigmoid output) trained one epoch on a 2,000-user slice of the same
shape: the work of predicting does not depend on the weights.

  benchmarks/predict/bench_predict.py --base ../base/build [--build build] [--users 138493]
      [--k 100] [--threads 2] [--repeats 2] [--config FILE] [--work DIR] [--out FILE]

--precisions fp32,bf16 (instead of --base): one build, `--precision fp32` and `--precision bf16`
alternately (their recs differ: BF16 operands move scores by their rounding), the kernel the bf16
GEMMs ran (predict's stderr line) and bf16's scoring users/s over fp32's.
"""

import argparse
import datetime
import filecmp
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from cpuinfo import cpu_isa, cpu_model  # noqa: E402

ITEMS, USERS, NNZ = 27278, 138493, 20000263


def commit_of(cli):
    """' at <commit>' of the source tree above a build directory, when it is a git checkout."""
    r = subprocess.run(["git", "-C", str(cli.resolve().parent.parent), "rev-parse", "--short",
                        "HEAD"], capture_output=True, text=True)
    return f" at {r.stdout.strip()}" if r.returncode == 0 else ""


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stderr}")
    return r


def precision_summary(a, runs, kernel_lines, model, nnz):
    """--precisions: bf16's phases against fp32's, scoring users/s, and the kernel bf16 ran."""
    med = {name: {k: round(statistics.median(r["phases_s"][k] for r in rs), 3)
                  for k in rs[0]["phases_s"]} | {"wall": round(statistics.median(
                      r["wall_s"] for r in rs), 3)} for name, rs in runs.items()}
    users_per_s = {name: {"score": round(a.users / m["score"]),
                          "score_plus_top_k": round(a.users / (m["score"] + m["top_k"])),
                          "whole_process": round(a.users / m["wall"])}
                   for name, m in med.items()}
    ratio = {k: round(users_per_s["bf16"][k] / users_per_s["fp32"][k], 2)
             for k in users_per_s["bf16"]}
    date = datetime.date.today().isoformat()
    result = {
        "benchmark": "predict-precision", "date": date, "machine": "vm", "cpu": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cores": os.cpu_count(), "threads": a.threads, "users": a.users, "items": ITEMS,
        "nnz": nnz, "k": a.k, "model": str(model.name),
        "command": "sparsenet predict -n MODEL --input DATA -k %d -s FILE --threads %d "
                   "--device cpu --timings --precision fp32|bf16" % (a.k, a.threads),
        "build": run([Path(a.build) / "sparsenet", "--version"]).stdout.strip()
                 + commit_of(Path(a.build) / "sparsenet"),
        "bf16_kernel": sorted(kernel_lines), "runs": runs, "median_s": med,
        "users_per_s": users_per_s, "bf16_over_fp32": ratio,
        "note": "score: the forward pass of every batch (the GEMMs); top_k: selection; "
                "runs alternate fp32, bf16",
    }
    out = (Path(a.out) if a.out else
           ROOT / "benchmarks" / "results" / f"{date}-vm-predict-precision.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"median_s": med, "users_per_s": users_per_s, "bf16_over_fp32": ratio,
                      "bf16_kernel": sorted(kernel_lines)}, indent=2))
    print(f"wrote {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"), help="the new build's directory")
    p.add_argument("--base", help="the base build's directory")
    p.add_argument("--precisions", help="fp32,bf16: compare the precisions of --build instead")
    p.add_argument("--users", type=int, default=USERS)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--config", default=str(ROOT / "configs" / "dsstne-bench.json"))
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "sparsenet-bench-predict"))
    p.add_argument("--out", help="result JSON (default benchmarks/results/<date>-vm-predict.json)")
    a = p.parse_args()
    if (a.base is None) == (a.precisions is None):
        sys.exit("give --base DIR (two builds) or --precisions fp32,bf16 (one build)")
    os.makedirs(a.work, exist_ok=True)
    new = Path(a.build) / "sparsenet"
    if a.base is None:
        if a.precisions != "fp32,bf16":
            sys.exit(f"--precisions: only fp32,bf16 is compared, got {a.precisions}")
        clis = {"fp32": new, "bf16": new}
        flags = {"fp32": ["--precision", "fp32"], "bf16": ["--precision", "bf16"]}
    else:
        clis = {"base": Path(a.base) / "sparsenet", "new": new}
        flags = {"base": [], "new": []}
    for name, cli in clis.items():
        if not cli.exists():
            sys.exit(f"--{'base' if name == 'base' else 'build'}: {cli} not found")

    nnz = round(NNZ / USERS * a.users)
    data = Path(a.work) / f"ml20m-shape-{a.users}.nc"
    if not data.exists():
        run([new, "generate", "-o", data, "--users", a.users, "--items", ITEMS, "--nnz", nnz,
             "--seed", 1, "-q"])
    config_name = Path(a.config).stem
    model = Path(a.work) / f"{config_name}.nc"
    if not model.exists():
        slice_ = Path(a.work) / "slice-2000.nc"
        run([new, "generate", "-o", slice_, "--users", 2000, "--items", ITEMS, "--nnz",
             round(NNZ / USERS * 2000), "--seed", 2, "-q"])
        run([new, "train", "-c", a.config, "-i", slice_, "-n", model, "-e", 1, "-b", 256,
             "--threads", a.threads, "--device", "cpu", "-q"])

    kernel_lines = set()

    def predict(name, out, extra=()):
        cmd = [clis[name], "predict", "-n", model, "--input", data, "-k", a.k, "-s", out,
               "--threads", a.threads, "--device", "cpu", "--timings", *flags[name], *extra]
        t0 = time.monotonic()
        r = run(cmd)
        wall = time.monotonic() - t0
        phases = {m.group(1): float(m.group(2))
                  for m in re.finditer(r"^predict: (\w+) ([\d.]+) s$", r.stderr, re.M)}
        kernel_lines.update(m.group(1) for m in re.finditer(r"^predict: (bf16 GEMMs -> .*)$",
                                                            r.stderr, re.M))
        return {"phases_s": phases, "wall_s": round(wall, 3)}

    runs = {name: [] for name in clis}
    outs = {name: Path(a.work) / f"recs-{name}.txt" for name in runs}
    for i in range(a.repeats):
        for name in runs:
            runs[name].append(predict(name, outs[name]))
            print(f"repeat {i + 1} {name}: {runs[name][-1]}", file=sys.stderr)
        if a.base is not None and not filecmp.cmp(outs["base"], outs["new"], shallow=False):
            sys.exit(f"{outs['base']} and {outs['new']} differ")
    if a.base is None:
        precision_summary(a, runs, kernel_lines, model, nnz)
        return
    npz = predict("new", Path(a.work) / "recs-new.npz", ["--output-format", "npz"])
    print(f"npz: {npz}", file=sys.stderr)

    def summary(rs, how):
        keys = sorted({k for r in rs for k in r["phases_s"]})
        m = {k: round(how(r["phases_s"][k] for r in rs if k in r["phases_s"]), 3) for k in keys}
        m["wall"] = round(how(r["wall_s"] for r in rs), 3)
        return m

    med = {name: summary(rs, statistics.median) for name, rs in runs.items()}
    least = {name: summary(rs, min) for name, rs in runs.items()}
    # The base build's top_k is the new build's score + top_k.
    new_top = med["new"].get("score", 0) + med["new"].get("top_k", 0)
    ratio = {"write": round(med["base"]["write"] / med["new"]["write"], 2),
             "score_plus_top_k": round(med["base"]["top_k"] / new_top, 2),
             "load": round(med["base"]["load"] / med["new"]["load"], 2),
             "wall": round(med["base"]["wall"] / med["new"]["wall"], 2),
             "write_min": round(least["base"]["write"] / least["new"]["write"], 2),
             "write_per_repeat": [round(b["phases_s"]["write"] / n["phases_s"]["write"], 2)
                                  for b, n in zip(runs["base"], runs["new"])]}
    date = datetime.date.today().isoformat()
    result = {
        "benchmark": "predict",
        "date": date,
        "machine": "vm",
        "cpu": cpu_model(), "cpu_isa": cpu_isa(),
        "cores": os.cpu_count(),
        "shared": "the machine's 2 cores were shared with other jobs: compare the two builds "
                  "within this run only",
        "threads": a.threads,
        "users": a.users, "items": ITEMS, "nnz": nnz, "k": a.k,
        "data": f"sparsenet generate --users {a.users} --items {ITEMS} --nnz {nnz} --seed 1",
        "model": f"{Path(a.config).relative_to(ROOT) if Path(a.config).is_relative_to(ROOT) else a.config}, "
                 "trained 1 epoch on a 2,000-user slice of the same shape",
        "command": "sparsenet predict -n MODEL --input DATA -k %d -s FILE --threads %d "
                   "--device cpu --timings" % (a.k, a.threads),
        "builds": {name: run([cli, "--version"]).stdout.strip() + commit_of(cli)
                   for name, cli in clis.items()},
        "recs_files_identical": True,
        "runs": runs,
        "median_s": med,
        "min_s": least,
        "base_over_new": ratio,
        "new_npz": npz,
        "note": "base phases: load, top_k (scoring and selection together), write; new: load, "
                "score, top_k, write, total. write: formatting and writing the recs file, "
                "before its fsync; wall: the whole process",
    }
    out = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / f"{date}-vm-predict.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"median_s": med, "base_over_new": ratio}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Python against the CLI on the same prediction work (docs/benchmarks.md, "Python").

The work: load the model file, read a 10,000-user input dataset, rank every item for every user
(their input items excluded), keep the top K, write the recs file. The CLI does it as
`sparsenet predict -n MODEL --input USERS.nc -k K -s FILE --threads T --device cpu` (timed as a
process, its start included); Python as Network.load + Dataset.load + net.predict + write_recs,
timed in the running interpreter (a notebook's situation: Python and the package already
loaded). Runs alternate (CLI, Python, CLI, ...) so that load on the machine hits both alike;
the two recs files must be identical. Reported: wall time (median and min: the machine
may be shared) and CPU time (user + sys, the CLI's from its rusage), each as Python / CLI. A second Python row starts from a scipy matrix already in
memory (Dataset.from_scipy + predict + write_recs; the model loaded once).

Data: the first 10,000 users of the Gowalla train split (../shared/data/gowalla) when present,
else `sparsenet generate` (10,000 x 40,981). Model: configs/protocol-a.json with its initial
weights (600 hidden units, 40,981 items; training does not change the work).

  PYTHONPATH=build/python build/pyenv/bin/python benchmarks/python/predict_bench.py \
      [--build build] [--users 10000] [--k 100] [--threads 2] [--repeats 5] [--out FILE]
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--users", type=int, default=10000)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", help="result JSON (default benchmarks/results/<date>-<machine>-"
                                 "python-predict.json)")
    a = p.parse_args()
    sys.path.insert(0, str(Path(a.build) / "python"))
    import sparsenet

    cli = str(Path(a.build) / "sparsenet")
    work = Path(tempfile.mkdtemp(prefix="sparsenet-pybench-"))
    gowalla = ROOT.parent / "shared" / "data" / "gowalla" / "train.txt"
    if gowalla.exists():
        x = sparsenet.convert(gowalla, "gl_input", format="user-items").dataset.to_scipy()
        source = f"Gowalla train split, first {a.users} users"
    else:
        subprocess.run([cli, "generate", "-o", work / "gen.nc", "--users", str(a.users),
                        "--items", "40981", "--nnz", str(27 * a.users), "-q"], check=True)
        x = sparsenet.Dataset.load(work / "gen.nc").to_scipy()
        source = f"sparsenet generate, {a.users} x 40981"
    x = x[: a.users]
    users = work / "users.nc"
    sparsenet.Dataset.from_scipy(x, "gl_input").save(users)
    model = work / "model.nc"
    sparsenet.Network.from_json(ROOT / "configs" / "protocol-a.json", device="cpu",
                                threads=a.threads,
                                widths={"gl_input": x.shape[1], "gl_output": x.shape[1]}).save(model)

    def cpu(who):
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    cpu_times = {"cli": [], "python": [], "python_scipy_model_loaded": []}

    def run_cli():
        c = cpu(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([cli, "predict", "-n", str(model), "--input", str(users), "-k", str(a.k),
                        "-s", str(work / "cli.recs"), "--threads", str(a.threads),
                        "--device", "cpu"], check=True)
        cpu_times["cli"].append(cpu(resource.RUSAGE_CHILDREN) - c)
        return time.perf_counter() - t

    def run_python():
        c = cpu(resource.RUSAGE_SELF)
        t = time.perf_counter()
        net = sparsenet.Network.load(model, device="cpu", threads=a.threads)
        ids, scores = net.predict(sparsenet.Dataset.load(users), k=a.k)
        sparsenet.write_recs(work / "py.recs", ids, scores)
        cpu_times["python"].append(cpu(resource.RUSAGE_SELF) - c)
        return time.perf_counter() - t

    loaded = sparsenet.Network.load(model, device="cpu", threads=a.threads)

    def run_scipy():
        c = cpu(resource.RUSAGE_SELF)
        t = time.perf_counter()
        ids, scores = loaded.predict(x, k=a.k)
        sparsenet.write_recs(work / "scipy.recs", ids, scores)
        cpu_times["python_scipy_model_loaded"].append(cpu(resource.RUSAGE_SELF) - c)
        return time.perf_counter() - t

    run_cli(), run_python()  # warm the page cache and both code paths
    for v in cpu_times.values():
        v.clear()
    times = {"cli": [], "python": [], "python_scipy_model_loaded": []}
    for _ in range(a.repeats):
        times["cli"].append(run_cli())
        times["python"].append(run_python())
        times["python_scipy_model_loaded"].append(run_scipy())
    same = (work / "cli.recs").read_bytes() == (work / "py.recs").read_bytes() == \
        (work / "scipy.recs").read_bytes()
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu_times.items()}
    result = {
        "benchmark": "python-predict", "date": datetime.date.today().isoformat(),
        "machine": platform.node(), "cpu": cpu_model(), "threads": a.threads,
        "users": x.shape[0], "items": x.shape[1], "nnz": int(x.nnz), "k": a.k, "data": source,
        "model": "configs/protocol-a.json, initial weights", "repeats": a.repeats,
        "seconds": times, "median_seconds": med, "min_seconds": best,
        "cpu_seconds": cpu_times, "median_cpu_seconds": cpu_med,
        "python_over_cli": {"median_wall": med["python"] / med["cli"],
                            "min_wall": best["python"] / best["cli"],
                            "median_cpu": cpu_med["python"] / cpu_med["cli"]},
        "recs_files_identical": same,
    }
    out = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / (
        f"{result['date']}-{platform.node() or 'machine'}-python-predict.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    for k, v in med.items():
        print(f"{k:28s} wall median {v:7.3f} s, min {best[k]:7.3f} s, cpu median "
              f"{cpu_med[k]:7.3f} s  (wall runs: {', '.join(f'{t:.3f}' for t in times[k])})")
    r = result["python_over_cli"]
    print(f"Python / CLI: wall median {r['median_wall']:.3f}, wall min {r['min_wall']:.3f}, "
          f"cpu median {r['median_cpu']:.3f}; recs files identical: {same}; wrote {out}")
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

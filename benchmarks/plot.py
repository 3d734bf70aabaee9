#!/usr/bin/env python3
"""Draws the PNG plots of docs/benchmarks.md and docs/quality.md from benchmarks/results/*.json
(never from figures typed by hand): for each training workload, seconds per epoch of sparsenet
and its peers (median, with every repetition as a dot); from a batch-size sweep (`bench.py --batch
64,128,... --tag batch-sweep`), seconds per epoch against the batch size; and for each protocol A
quality run (benchmarks/quality/), validation and test Recall@20 per epoch beside EASE and the
published numbers; from the GPU validation runs (benchmarks/results/gpu/), seconds per epoch of
sparsenet and PyTorch on the GPU.

usage: benchmarks/plot.py [--results benchmarks/results] [--out docs/img]
"""
import argparse
import glob
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLORS = {"sparsenet": "#1f77b4", "pytorch-sparse": "#ff7f0e", "pytorch-densify": "#7f7f7f"}


def latest(results, workload, tag=""):
    """The newest results file of a workload (file names start with the date)."""
    suffix = f"-{workload}-{tag}.json" if tag else f"-{workload}.json"
    files = sorted(f for f in glob.glob(os.path.join(results, "*.json")) if f.endswith(suffix))
    return json.load(open(files[-1])) if files else None


def systems_plot(runs, path):
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs):
        batch = run["workload"].get("batches", [run["workload"].get("batch")])[0]
        rows = [r for r in run["results"] if r.get("batch", batch) == batch]
        names = [r["system"] for r in rows]
        for i, r in enumerate(rows):
            ax.bar(i, r["median_s"], color=COLORS.get(r["system"], "#2ca02c"))
            ax.scatter([i] * len(r["seconds"]), r["seconds"], color="black", s=8, zorder=3)
            ax.text(i, r["median_s"], f"{r['median_s']:.2f} s\n{r['sparsenet_speedup']:.2f}x",
                    ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)), [n.replace("pytorch-", "PyTorch\n") for n in names])
        ax.set_ylabel("seconds per epoch (lower is better)")
        ax.set_ylim(0, max(r["median_s"] for r in rows) * 1.3)
        w = run["workload"]
        ax.set_title(f"{run['benchmark']}: {w['users']} users, batch {batch}\n"
                     f"{run['threads']} threads, {run['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", os.path.relpath(path, ROOT))


def sweep_plot(run, path):
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for system in dict.fromkeys(r["system"] for r in run["results"]):
        rows = sorted((r for r in run["results"] if r["system"] == system),
                      key=lambda r: r["batch"])
        ax.plot([r["batch"] for r in rows], [r["median_s"] for r in rows], marker="o",
                label=system, color=COLORS.get(system))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("seconds per epoch")
    ax.set_ylim(bottom=0)
    ax.legend()
    w = run["workload"]
    ax.set_title(f"{run['benchmark']}: {w['users']} users, {run['threads']} threads, "
                 f"{run['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", os.path.relpath(path, ROOT))


def quality_plot(run, path):
    model = run["model"]
    seeds = ""
    if "per_seed" in model:  # a run of several seeds: the curves of the first, named as such
        seeds = (f", seed {model['per_seed'][0]['seed']} of {len(model['per_seed'])} "
                 f"(mean test {model['test_recall@20']:.4f})")
        model = dict(model["per_seed"][0], config=model["config"])
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    ax.plot([r["epoch"] for r in model["validation_curve"]],
            [r["recall@20"] for r in model["validation_curve"]], label="sparsenet, validation")
    ax.plot([r["epoch"] for r in model["test_curve"]],
            [r["recall@20"] for r in model["test_curve"]], label="sparsenet, test")
    ax.axvline(model["chosen_epoch"], color="gray", linestyle=":", label="epoch chosen")
    lines = dict(run.get("published", {}))
    if "ease" in run:
        lines["EASE (ours, test)"] = [run["ease"]["test_recall@20"]]
    for i, (name, values) in enumerate(sorted(lines.items(), key=lambda kv: -kv[1][0])):
        ax.axhline(values[0], color=f"C{(i % 7) + 2}", linestyle="--", linewidth=0.8,
                   label=f"{name} {values[0]:.4f}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("Recall@20")
    ax.set_title(f"{run['benchmark']} (protocol A), {os.path.basename(model['config'])}, "
                 f"{run['date']}{seeds}", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", os.path.relpath(path, ROOT))


def gpu_runs(results):
    """The GPU validation runs (benchmarks/results/gpu/*.json), oldest first (by "started")."""
    runs = [json.load(open(f)) for f in glob.glob(os.path.join(results, "gpu", "*.json"))]
    runs = [r for r in runs if not r.get("dry_run") and r.get("device")]
    return sorted(runs, key=lambda r: r["started"])


def gpu_plot(runs, path):
    """Seconds per epoch on the GPU: the newest run's sparsenet and PyTorch (TF32 and FP32), with
    the first run's sparsenet beside them."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, workload in zip(axes, ("dsstne_bench", "mult_dae")):
        have = [r for r in runs if (r.get(workload) or {}).get("tf32", {}).get("sparsenet_s_per_epoch")]
        if not have:
            continue
        first, last = have[0], have[-1]
        f, w = first[workload], last[workload]
        bars = [(f"sparsenet TF32\nfirst run\n{first['started'][11:16]}", f["tf32"]["sparsenet_s_per_epoch"],
                 "#aec7e8"),
                ("sparsenet\nTF32", w["tf32"]["sparsenet_s_per_epoch"], COLORS["sparsenet"]),
                ("sparsenet\nFP32", w["sparsenet_s_per_epoch"], COLORS["sparsenet"]),
                ("PyTorch eager\nTF32", w["tf32"]["pytorch_eager_s_per_epoch"], COLORS["pytorch-sparse"]),
                ("PyTorch eager\nFP32", w["pytorch_eager_s_per_epoch"], COLORS["pytorch-sparse"]),
                ("torch.compile\nTF32", w["torch_compile_s_per_epoch"], "#d62728")]
        bars = [b for b in bars if b[1]]
        for i, (name, value, color) in enumerate(bars):
            ax.bar(i, value, color=color)
            ax.text(i, value, f"{value:.2f} s", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7, rotation=30)
        ax.set_ylabel("seconds per epoch (lower is better)")
        ax.set_ylim(0, max(b[1] for b in bars) * 1.2)
        shape = w["shape"]
        ax.set_title(f"{workload.replace('_', '-')}: {shape['users']} users x {shape['items']} items, "
                     f"batch {w['batch']}\n{last['device']}, {last['started'][:10]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", os.path.relpath(path, ROOT))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    runs = [r for r in (latest(a.results, w) for w in ("dsstne-bench", "mult-dae")) if r]
    if runs:
        systems_plot(runs, os.path.join(a.out, "bench-cpu-training.png"))
    gpu = gpu_runs(a.results)
    if gpu:
        gpu_plot(gpu, os.path.join(a.out, "bench-gpu-training.png"))
    sweep = latest(a.results, "dsstne-bench", "batch-sweep")
    if sweep:
        sweep_plot(sweep, os.path.join(a.out, "bench-cpu-batch-sweep.png"))
    for dataset in ("gowalla", "ml1m", "yelp2018"):
        # Model and EASE may come from separate runs (--no-ease / --no-model, with a --tag).
        files = sorted(glob.glob(os.path.join(a.results, f"*-quality-{dataset}*.json")))
        runs = [json.load(open(f)) for f in files]
        model = [r for r in runs if "model" in r]
        # Runs of the dataset script's default config as it is today, where there are any: file
        # names of one date sort by tag, not by time, and other configs (Gowalla's temporal one)
        # are not the default.
        default = json.load(open(os.path.join(ROOT, "configs", f"protocol-a-{dataset}.json")))
        model = [r for r in model if r["model"].get("config_json") == default] or model
        if model:
            run = dict(model[-1])
            ease = [r for r in runs if "ease" in r]
            if ease:
                run["ease"] = ease[-1]["ease"]
            quality_plot(run, os.path.join(a.out, f"quality-{dataset}.png"))


if __name__ == "__main__":
    main()

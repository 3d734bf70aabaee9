#!/usr/bin/env python3
"""Protocol A of ../shared/design/quality.md on one dataset (Gowalla, Yelp2018, ML-1M): fixed
published split, full ranking, Recall@20 / NDCG@20 over all test users, train items excluded.
Converts, trains, evaluates with sparsenet's own tools and writes
benchmarks/results/<date>-<machine>-quality-<dataset>.json.

Model selection is honest: the epoch is chosen on validation (ML-1M: its own validation file;
Gowalla and Yelp2018: 10 % of each user's train items carved out with seed 1), then the model is
trained on the whole train file and the test number reported is the one of the chosen epoch. The
number comparable to the published tables (best epoch picked on the test set, as LightGCN and its
followers did) is reported beside it, from the same run.

The EASE peer (benchmarks/peers/ease.py) picks lambda on the same validation split, is refitted on
the whole train file, writes its test top-20 as a recs file, and that file is scored by
`sparsenet evaluate --recs` (and by the peer's own numpy code, as a cross-check).

With --seeds 1,2,3 the model is selected and trained once per seed: the seed is the validation
carve-out's (Gowalla, Yelp2018; ML-1M's validation file is fixed) and the training's (`train
--seed`: initial weights, shuffling, dropout). `model` then holds the means over the seeds
(`test_recall@20`, `validation_recall@20`, `test_ndcg@20`; `chosen_epoch`: the median), their
standard deviation and range, and `per_seed` each seed's values and curves. Without --seeds: one
run with the split's seed 1 and the config's own seed, as before.

A seed of Gowalla or Yelp2018 takes about an hour on a 2-core machine, so the seeds of one
configuration may run apart (`--seeds 2`, later `--seeds 3`) and be joined afterwards: --merge
reads result files of the same dataset, config (its JSON, not only its name), epochs and train
flags, with distinct seeds, and writes the file that one run over all their seeds would have
written (`seeds`, `model` with means, spreads and `per_seed`), each seed keeping the commit and
date of the run that made it. Anything that differs is refused, naming the file and the field.

usage: protocol_a.py --dataset gowalla|yelp2018|ml1m [--config configs/X.json] [--epochs N]
       [--build build] [--python PY] [--ease-lambdas 200,500,1000] [--no-ease] [--no-model]
       [--train-flags "..."] [--threads 2] [--work DIR] [--tag T] [--seeds 1,2,3]
       protocol_a.py --merge RESULT.json RESULT.json ... [--tag T] [--out FILE]
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from cpuinfo import cpu_isa, cpu_model  # noqa: E402
# The datasets are not project files (third-party data, tens of MB): their folder is a parameter
# (--data, or $SPARSENET_DATA_DIR), by default the workspace's shared copy.
DATA = os.environ.get("SPARSENET_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
DATASETS = {  # folder, has a validation file
    "gowalla": ("gowalla", False),
    "yelp2018": ("yelp2018", False),
    "ml1m": ("movielens1m_m1", True),
}
# Published Recall@20 / NDCG@20 on these splits (../shared/design/quality.md).
PUBLISHED = {
    "gowalla": {"Mult-VAE": [0.1641, 0.1335], "GRMF": [0.1477, 0.1205], "NGCF": [0.1570, 0.1327],
                "LightGCN": [0.1830, 0.1554], "EASE^R": [0.1765, 0.1467],
                "UltraGCN": [0.1862, 0.1580], "SimpleX": [0.1872, 0.1557]},
    "yelp2018": {"Mult-VAE": [0.0584, 0.0450], "GRMF": [0.0571, 0.0462],
                 "NGCF": [0.0579, 0.0477], "LightGCN": [0.0649, 0.0530],
                 "EASE^R": [0.0657, 0.0552], "SimpleX": [0.0701, 0.0575]},
    "ml1m": {"NGCF": [0.2513, 0.2511], "LightGCN": [0.2576, 0.2427],
             "UltraGCN": [0.2787, 0.2642], "SimpleX": [0.2802, 0.2670]},
}


def run(cmd, log=None):
    print("+", " ".join(shlex.quote(c) for c in cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "a") as f:
            f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr}")
    return r.stdout


def epochs_of(metrics_path):
    return [json.loads(line) for line in open(metrics_path)]


def train_curve(a, sparsenet, train, target, model, metrics, epochs, log, seed=None):
    """Trains `epochs` epochs on `train`; after each, Recall/NDCG@20 of `target` (input: train)."""
    if os.path.exists(metrics):
        os.remove(metrics)
    t0 = time.perf_counter()
    seeded = ["--seed", str(seed)] if seed is not None else []
    run([sparsenet, "train", "-c", a.config, "-i", train, "-n", model, "-e", str(epochs),
         "--threads", str(a.threads), "--validate-input", train, "--validate-target", target,
         "--validate-k", "20", "--metrics-out", metrics, "-q"] + seeded +
        shlex.split(a.train_flags), log)
    wall = time.perf_counter() - t0
    rows = epochs_of(metrics)
    curve = [{"epoch": r["epoch"], "loss": r["loss"], "seconds": r["seconds"],
              "recall@20": r["validation"]["recall@20"], "ndcg@20": r["validation"]["ndcg@20"]}
             for r in rows]
    return curve, wall


def carves_last(split_flags):
    """Whether `split fixed` flags hold the carve-out of each user's last items."""
    return any(f == "--carve-from=last" or (f == "--carve-from" and nxt == "last")
               for f, nxt in zip(split_flags, split_flags[1:] + [""]))


def select_and_train(a, sparsenet, src, has_validation, work, seed, log):
    """Steps 1-2 for one seed: the split (carve-out seed `seed`, default 1) and the model (epoch
    chosen on validation, then trained on all of train). Returns (file of the split, the fit
    file, the model's values or None with --no-model)."""
    # 1. Split: one users/items index for every file, so rows and columns align.
    split = os.path.join(work, "split")
    cmd = [sparsenet, "split", "fixed", "--train", os.path.join(src, "train.txt"),
           "--test", os.path.join(src, "test.txt"), "-o", split, "-q"]
    extra = shlex.split(a.split_flags)
    if has_validation:
        cmd += ["--validation", os.path.join(src, "valid.txt")]
    elif carves_last(extra):  # the order decides: no seed
        cmd += ["--carve-validation", "0.1"]
    else:
        cmd += ["--carve-validation", "0.1", "--seed", str(1 if seed is None else seed)]
    run(cmd + extra, log)
    f = lambda name: os.path.join(split, name)  # noqa: E731
    fit = f("train.nc") if has_validation else f("train_fit.nc")
    if a.no_model:
        return f, fit, None

    # 2. The model: epoch chosen on validation, then trained on all of train.
    select, select_wall = train_curve(a, sparsenet, fit, f("validation.nc"),
                                      os.path.join(work, "select.nc"),
                                      os.path.join(work, "select.jsonl"), a.epochs, log, seed)
    best = max(select, key=lambda r: r["recall@20"])
    final, final_wall = train_curve(a, sparsenet, f("train.nc"), f("test.nc"),
                                    os.path.join(work, "final.nc"),
                                    os.path.join(work, "final.jsonl"), a.epochs, log, seed)
    chosen = final[best["epoch"] - 1]
    peak = max(final, key=lambda r: r["recall@20"])
    one = {
        "config": os.path.relpath(a.config, ROOT),
        "config_json": json.load(open(a.config)), "train_flags": a.train_flags,
        **({"split_flags": a.split_flags} if a.split_flags else {}),
        "epochs": a.epochs, "chosen_epoch": best["epoch"],
        "validation_recall@20": best["recall@20"],
        "test_recall@20": chosen["recall@20"], "test_ndcg@20": chosen["ndcg@20"],
        "test_best_epoch": peak["epoch"], "test_best_recall@20": peak["recall@20"],
        "test_best_ndcg@20": peak["ndcg@20"],
        "train_seconds_per_epoch": sum(r["seconds"] for r in final) / len(final),
        "wall_seconds": {"select": select_wall, "final": final_wall},
        "validation_curve": select, "test_curve": final}
    print(f"model{'' if seed is None else f' (seed {seed})'}: epoch {best['epoch']} chosen on "
          f"validation (Recall@20 {best['recall@20']:.4f}); test Recall@20 "
          f"{chosen['recall@20']:.4f} NDCG@20 {chosen['ndcg@20']:.4f}; best test epoch "
          f"{peak['epoch']}: {peak['recall@20']:.4f} / {peak['ndcg@20']:.4f}", flush=True)
    return f, fit, one


def summarize(runs):
    """The seeds' means (schema of one run's `model`), spreads and per-seed values."""
    out = {k: runs[0][k] for k in ("config", "config_json", "train_flags", "epochs",
                                   "split_flags") if k in runs[0]}
    for key in ("test_recall@20", "validation_recall@20", "test_ndcg@20",
                "test_best_recall@20", "train_seconds_per_epoch"):
        values = [r[key] for r in runs]
        out[key] = statistics.fmean(values)
        out[key + "_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        out[key + "_range"] = [min(values), max(values)]
    out["chosen_epoch"] = int(statistics.median(r["chosen_epoch"] for r in runs))
    out["per_seed"] = runs
    return out


def head_commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def print_seeds_summary(seeds, m):
    print(f"model over seeds {seeds}: test Recall@20 {m['test_recall@20']:.4f} "
          f"(std {m['test_recall@20_std']:.4f}, range {m['test_recall@20_range'][0]:.4f}-"
          f"{m['test_recall@20_range'][1]:.4f}); validation {m['validation_recall@20']:.4f}",
          flush=True)


def write_result(result, dataset, machine, tag, path=None):
    """benchmarks/results/<date>-<machine>-quality-<dataset>[-<tag>].json, or `path`."""
    name = f"{result['date']}-{machine}-quality-{dataset}{'-' + tag if tag else ''}.json"
    if path is None:
        os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
        path = os.path.join(ROOT, "benchmarks", "results", name)
    json.dump(result, open(path, "w"), indent=2)
    print("wrote", os.path.relpath(path, ROOT))


def merge(paths, tag, out=None):
    """One multi-seed result from result files of one configuration run with different seeds."""
    if len(paths) < 2:
        sys.exit("--merge needs at least two result files")
    files = []
    for path in paths:
        try:
            files.append((path, json.load(open(path))))
        except (OSError, ValueError) as e:
            sys.exit(f"{path}: not a readable result file ({e})")
    first_path, first = files[0]
    runs, sources = [], []
    for path, r in files:
        for key in ("benchmark", "protocol"):
            if r.get(key) != first.get(key):
                sys.exit(f"{path}: {key} is {r.get(key)!r}, {first_path} has {first.get(key)!r}")
        m = r.get("model")
        if not m:
            sys.exit(f"{path}: no `model` (a --no-model run has no seeds to merge)")
        if "seeds" not in r:
            sys.exit(f"{path}: a run without --seeds (the config's own seed) cannot be merged: "
                     "rerun it with --seeds N")
        for key in ("config_json", "epochs", "train_flags", "split_flags"):
            if m.get(key) != first["model"].get(key):
                sys.exit(f"{path}: model.{key} differs from {first_path}'s: seeds of different "
                         "configurations are not one result")
        for one in m["per_seed"]:
            if any(one["seed"] == seen["seed"] for seen in runs):
                sys.exit(f"{path}: seed {one['seed']} is in two of the files")
            runs.append({**one, "commit": one.get("commit", r.get("commit")),
                         "date": one.get("date", r.get("date"))})
        sources.append({"file": os.path.relpath(os.path.abspath(path), ROOT),
                        "commit": r.get("commit"), "date": r.get("date"),
                        "seeds": r["seeds"]})
    runs.sort(key=lambda one: one["seed"])
    result = {k: first[k] for k in ("benchmark", "protocol", "published") if k in first}
    result.update({"date": max(s["date"] for s in sources), "machine": first.get("machine"),
                   "threads": first.get("threads"),
                   "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                   "commit": head_commit(), "merged_from": sources,
                   "validation": ("valid.txt" if first.get("validation") == "valid.txt" else
                                  "10% of train per user, the seed's carve-out"),
                   "seeds": [one["seed"] for one in runs], "model": summarize(runs)})
    print_seeds_summary(result["seeds"], result["model"])
    write_result(result, result["benchmark"].removeprefix("quality-"), result["machine"], tag,
                 out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--merge", nargs="+", metavar="RESULT.json",
                   help="join result files of one configuration run with different seeds")
    p.add_argument("--out", default=None, help="--merge: the file to write (default "
                   "benchmarks/results/<date>-<machine>-quality-<dataset>[-<tag>].json)")
    p.add_argument("--dataset", choices=sorted(DATASETS))
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "mult-dae.json"))
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--train-flags", default="", help="more `sparsenet train` flags")
    p.add_argument("--split-flags", default="",
                   help="more `sparsenet split fixed` flags (e.g. '--carve-from last --recency "
                        "10': docs/quality.md)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.join(ROOT, "benchmarks", ".venv", "bin", "python"))
    p.add_argument("--ease-lambdas", default="200,500,1000")
    p.add_argument("--no-ease", action="store_true")
    p.add_argument("--no-model", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "sparsenet-quality"))
    p.add_argument("--tag", default="", help="suffix of the results file name")
    p.add_argument("--seeds", default="",
                   help="comma-separated seeds: the model selected and trained once per seed "
                        "(validation carve-out and training); default: one run, carve-out seed 1")
    p.add_argument("--data", default=DATA,
                   help="folder holding <dataset>/train.txt ... (default $SPARSENET_DATA_DIR or "
                        "../shared/data)")
    a = p.parse_args()
    if a.merge:
        return merge(a.merge, a.tag, a.out)
    if not a.dataset:
        p.error("--dataset is required (or --merge)")
    folder, has_validation = DATASETS[a.dataset]
    src = os.path.join(a.data, folder)
    if not os.path.exists(os.path.join(src, "train.txt")):
        sys.exit(f"{src}/train.txt not found: protocol A needs the {folder} split "
                 "(give its parent folder with --data DIR)")
    sparsenet = os.path.join(a.build, "sparsenet")
    work = os.path.join(a.work, a.dataset)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "log.txt")
    result = {"benchmark": f"quality-{a.dataset}", "protocol": "A",
              "date": datetime.date.today().isoformat(), "machine": platform.node(),
              "cpu": cpu_model(), "cpu_isa": cpu_isa(), "threads": a.threads,
              "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
              "commit": head_commit(),
              "published": PUBLISHED[a.dataset]}

    seeds = [int(x) for x in a.seeds.split(",")] if a.seeds else [None]
    runs = []
    for seed in seeds:
        seed_work = work if seed is None else os.path.join(work, f"seed-{seed}")
        os.makedirs(seed_work, exist_ok=True)
        f, fit, one = select_and_train(a, sparsenet, src, has_validation, seed_work, seed, log)
        if seed == seeds[0]:
            first_split, first_fit = f, fit
            result["validation"] = (
                "valid.txt" if has_validation else
                "the last 10% of each user's train items in train.txt's order"
                if carves_last(shlex.split(a.split_flags)) else
                f"10% of train per user, seed {1 if seed is None else seed}")
        if one:
            runs.append({"seed": seed, **one, "commit": result["commit"],
                         "date": result["date"]})
    f, fit = first_split, first_fit
    if runs and seeds == [None]:
        result["model"] = {k: v for k, v in runs[0].items()
                           if k not in ("seed", "commit", "date")}
    elif runs:
        result["seeds"] = seeds
        result["model"] = summarize(runs)
        print_seeds_summary(seeds, result["model"])

    # 3. The EASE peer: lambda on validation, refit on train, scored through a recs file.
    if not a.no_ease:
        ease = [a.python, os.path.join(ROOT, "benchmarks", "peers", "ease.py"),
                "--threads", str(a.threads)]
        grid = []
        for lam in [float(x) for x in a.ease_lambdas.split(",")]:
            r = json.loads(run(ease + ["--train", fit, "--heldout", f("validation.nc"),
                                       "--lambda", str(lam)], log).strip().splitlines()[-1])
            grid.append(r)
            print(f"EASE lambda {lam:g}: validation Recall@20 {r['recall@20']:.4f}", flush=True)
        lam = max(grid, key=lambda r: r["recall@20"])["lambda"]
        recs = os.path.join(work, "ease-test.recs")
        r = json.loads(run(ease + ["--train", f("train.nc"), "--heldout", f("test.nc"),
                                   "--lambda", str(lam), "--recs", recs,
                                   "--users-index", f("users.index"),
                                   "--items-index", f("items.index")], log).strip().splitlines()[-1])
        scored = os.path.join(work, "ease-test.json")
        run([sparsenet, "evaluate", "--recs", recs, "--heldout", f("test.nc"), "-k", "20",
             "--samples-index", f("users.index"), "--features-index", f("items.index"),
             "--input", f("train.nc"), "--json", scored], log)
        ours = json.load(open(scored))
        ours = ours.get("recs", ours.get("model", ours))
        result["ease"] = {
            "lambda": lam, "validation_grid": grid,
            "test_recall@20": ours["recall@20"], "test_ndcg@20": ours["ndcg@20"],
            "numpy_recall@20": r["recall@20"], "numpy_ndcg@20": r["ndcg@20"],
            "fit_seconds": r["seconds_fit"], "score_seconds": r["seconds_score"]}
        print(f"EASE lambda {lam:g}: test Recall@20 {ours['recall@20']:.4f} NDCG@20 "
              f"{ours['ndcg@20']:.4f} (sparsenet evaluate --recs); numpy "
              f"{r['recall@20']:.4f} / {r['ndcg@20']:.4f}; fit {r['seconds_fit']:.0f} s",
              flush=True)

    write_result(result, a.dataset, platform.node(), a.tag)


if __name__ == "__main__":
    main()

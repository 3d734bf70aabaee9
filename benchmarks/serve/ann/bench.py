#!/usr/bin/env python3
"""ANN index benchmark (docs/serving.md "ANN index", docs/benchmarks-ann.md): exact serving (the fp16
screen, today's path) against an ANN index on one model trained on generated data.

For one shape (--items, --users, --hidden) it
 1. generates interactions with Zipf item popularity and planted topics (`sparsenet generate`),
    keeps the last --heldout users out of training, trains --epochs epochs (`sparsenet train`,
    Adam; --steps stops earlier);
 2. builds one ANN index per --indexes entry, KIND:VECTORS (`sparsenet ann-index`): build
    time, bytes per item;
 3. in process, one thread per query: exact top-100 (fp16 screening) and each index's top-100
    for every held-out user at each value of its accuracy knob (ivf: --probes, the cells
    scanned; hnsw: --hnsw-probes, efSearch): recall@100 against exact, p50/p99 latency,
    queries/s (the recall-latency curves);
 4. over HTTP on loopback: `sparsenet serve` exact and `serve --ann` with the first index (at
    --serve-probe, default the smallest probe with recall >= 0.95) with wrk at 1 and 8
    connections, single queries of the held-out users (k 100), each run bounded by --duration
    seconds and --max-requests.
--bf16-input adds the first index's curve with the input layer's weights in BF16
(bf16_input_weights), served over HTTP as "ann-after". Each in-process curve records the
Recommender's ann_memory_bytes and released_bytes.
Writes one JSON object to --out. Needs the build's `sparsenet`, its Python module (PYTHONPATH)
and wrk. Run through benchmarks/serve/ann/run.sh."""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

import sparsenet

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(map(str, cmd)))
    start = time.time()
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr, time.time() - start


def config(hidden, softmax=False):
    if softmax:  # Mult-DAE's output (configs/mult-dae.json): SoftMax over every item
        c = config(hidden)
        c["Layers"][2]["Activation"] = "SoftMax"
        c["Layers"][2]["WeightInit"] = {"Scheme": "Xavier", "Scale": 1.0}
        c["ErrorFunction"] = "CrossEntropy"
        del c["ScaledMarginalCrossEntropy"]
        return c
    return {
        "Version": 0.9, "Name": "ann-bench", "Kind": "AutoEncoder", "ShuffleIndices": True,
        "ScaledMarginalCrossEntropy": {"oneTarget": 0.9, "zeroTarget": 0.1, "oneScale": 1.0,
                                       "zeroScale": 1.0},
        "Layers": [
            {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input",
             "Sparse": True},
            {"Name": "Hidden", "Kind": "Hidden", "Type": "FullyConnected", "N": hidden,
             "Activation": "Tanh", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0}},
            {"Name": "Output", "Kind": "Output", "Type": "FullyConnected", "N": "auto",
             "DataSet": "gl_output", "Activation": "Sigmoid", "Sparse": True,
             "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -4.0}},
        ],
        "ErrorFunction": "ScaledMarginalCrossEntropy",
    }


def percentile(values, p):
    return float(np.percentile(np.asarray(values), p)) if len(values) else 0.0


def timed_queries(rec, queries, k, scores=None):
    """Each query alone on this thread: (lists of ids, latencies in seconds); the lists of
    scores appended to `scores` when given."""
    out, lat = [], []
    for q in queries:
        t = time.perf_counter()
        r = rec.recommend(q, k)
        lat.append(time.perf_counter() - t)
        out.append(list(r.ids))
        if scores is not None:
            scores.append(list(r.scores))
    return out, lat


def tie_recall(approx_scores, exact_scores):
    """The share of the approximate list whose (exact) scores reach the exact k-th score: items
    tied with it in float count as found (the exact list takes the lower ids among ties)."""
    total = 0.0
    for a, e in zip(approx_scores, exact_scores):
        if e:
            total += sum(1 for s in a if s >= e[-1]) / len(e)
    return total / max(1, len(exact_scores))


def recall(approx, exact):
    total = 0.0
    for a, e in zip(approx, exact):
        total += len(set(a) & set(e)) / max(1, len(e))
    return total / max(1, len(exact))


def default_cells(items):
    """The project's ivf default (docs/serving.md): the power of 2 at or above 4 sqrt(items)."""
    cells = 1
    while cells < 4 * np.sqrt(items):
        cells *= 2
    return cells


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serve_runs(cli, model, extra, bodies, args, label):
    """`sparsenet serve` with `extra` flags; wrk at each connection count. Returns the runs."""
    port = free_port()
    logf = open(os.path.join(args.tmp, f"serve-{label}.log"), "w")
    proc = subprocess.Popen([cli, "serve", "-n", model, "--port", str(port), "--threads",
                             str(args.threads)] + extra, stdout=logf, stderr=subprocess.STDOUT)
    runs = []
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 600
        while time.time() < deadline:
            if proc.poll() is not None:
                sys.exit(f"serve {label} exited: " + open(logf.name).read())
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                url + "/health"], capture_output=True, text=True)
            if r.stdout == "200":
                break
            time.sleep(0.5)
        status = open(f"/proc/{proc.pid}/status").read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) * 1024
        peak = int(re.search(r"VmHWM:\s+(\d+)", status)[1]) * 1024  # the load's peak
        for connections in args.connections:
            env = dict(os.environ, SERVE_BODIES=bodies, SERVE_PATH="/recommend",
                       SERVE_MAX_REQUESTS=str(args.max_requests))
            r = subprocess.run(["wrk", "-t", "1", "-c", str(connections), "-d",
                                f"{args.duration}s", "--timeout", "60s", "-s",
                                os.path.join(HERE, "..", "serve.lua"), url],
                               capture_output=True, text=True, env=env)
            line = [l for l in r.stdout.splitlines() if l.startswith("{")]
            if not line:
                sys.exit(f"wrk gave no result: {r.stdout}\n{r.stderr}")
            w = json.loads(line[-1])
            w["connections"] = connections
            w["queries_per_s"] = w["requests"] / (w["duration_us"] / 1e6)
            w["server"] = label
            w["server_rss_bytes"] = rss
            w["server_load_peak_bytes"] = peak
            log(f"serve {label} c{connections}: {w['queries_per_s']:.1f} q/s, p50 "
                f"{w['latency_p50_us'] / 1000:.2f} ms, p99 {w['latency_p99_us'] / 1000:.2f} ms")
            runs.append(w)
            # wrk leaves requests in flight: let the server finish them before the next run.
            time.sleep(1.0)
        metrics = subprocess.run(["curl", "-s", url + "/metrics"], capture_output=True,
                                 text=True).stdout
        m = re.search(r"^sparsenet_ann_queries_total (\d+)", metrics, re.M)
        if m:
            for w in runs:
                w["ann_queries_total_after"] = int(m[1])
    finally:
        proc.terminate()
        proc.wait(timeout=120)
        logf.close()
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True)
    ap.add_argument("--items", type=int, required=True)
    ap.add_argument("--users", type=int, required=True, help="training users")
    ap.add_argument("--heldout", type=int, default=1000)
    ap.add_argument("--per-user", type=int, default=30, help="mean interactions per user")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: none)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--optimizer", default="adam",
                    help="training's optimizer (adam: with lazy sparse updates; sgd fits 10M items)")
    ap.add_argument("--learning-rate", type=float, default=0.002)
    ap.add_argument("--softmax", action="store_true",
                    help="a SoftMax output layer (Mult-DAE's), ranked by its logits")
    ap.add_argument("--indexes", default="ivf:fp16",
                    help="comma-separated KIND:VECTORS (ivf, hnsw, flat; fp32, fp16, bf16), one "
                    "index each from the same model; the first is served over HTTP")
    ap.add_argument("--cells", type=int, default=0, help="ivf cells (0: the default)")
    ap.add_argument("--hnsw-m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=80)
    ap.add_argument("--probes", default="16,32,64,96,128,192,256",
                    help="ivf: cells scanned, the values of the recall-latency curve")
    ap.add_argument("--hnsw-probes", default="128,512,2048",
                    help="hnsw: efSearch values of the recall-latency curve")
    ap.add_argument("--serve-probe", type=int, default=0)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--connections", default="1,8")
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--max-requests", type=int, default=20000)
    ap.add_argument("--exact-queries", type=int, default=0,
                    help="held-out users timed on the exact path (0: all)")
    ap.add_argument("--cli", default="build/sparsenet")
    ap.add_argument("--work", default="", help="keep the files here (default: a temp folder)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reuse", action="store_true",
                    help="keep the data, model and ANN indexes already in --work (their times "
                    "from --reuse-times, a result file of the run that made them)")
    ap.add_argument("--reuse-times", default="")
    ap.add_argument("--bf16-input", action="store_true",
                    help="also the first index with the input layer's weights in BF16 "
                    "(bf16_input_weights): a curve, and served as 'ann-after'")
    ap.add_argument("--build-threads", type=int, default=0,
                    help="threads building each index (default --threads)")
    ap.add_argument("--skip-exact-serve", action="store_true",
                    help="no HTTP run of the exact path (its figures are in an earlier result)")
    ap.add_argument("--peers", action="store_true",
                    help="also the search alone beside faiss's IndexIVFFlat (inner product; "
                         "Debian's in C++, PyPI's from Python) and hnswlib over the same vectors, "
                         "at the same cells, probes and efSearch (peers.py; needs faiss-cpu and "
                         "hnswlib in this Python)")
    ap.add_argument("--search-bench", default="build/benchmarks/sparsenet_bench_ann_search",
                    help="--peers: the workbench timing the search alone (the project's ivf "
                         "indexes and Debian's faiss)")
    ap.add_argument("--extra-index", action="append", default=[], metavar="LABEL=FILE",
                    help="--peers: another ivf index of the same model in the search-alone run "
                         "(one built by an earlier sparsenet, say)")
    ap.add_argument("--no-python-peers", action="store_true",
                    help="--peers: the search-alone workbench only (no PyPI faiss-cpu, hnswlib)")
    ap.add_argument("--skip-serve", action="store_true", help="no HTTP runs at all")
    args = ap.parse_args()
    args.connections = [int(c) for c in args.connections.split(",")]
    configs = [tuple(spec.split(":")) for spec in args.indexes.split(",")]
    labels = [f"{kind}-{vectors}" for kind, vectors in configs]
    probes_of = {"ivf": [int(p) for p in args.probes.split(",")],
                 "hnsw": [int(p) for p in args.hnsw_probes.split(",")], "flat": [0]}
    cli = os.path.abspath(args.cli)
    work = args.work or tempfile.mkdtemp(prefix="ann-bench-")
    os.makedirs(work, exist_ok=True)
    args.tmp = work
    result = {"label": args.label, "machine": os.environ.get("MACHINE", "vm"),
              "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
              "load_before": open("/proc/loadavg").read().split()[:3],
              "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                           if l.startswith("model name")), ""),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip(),
              "args": {k: v for k, v in vars(args).items() if k != "tmp"}}

    # 1. data and training
    users = args.users + args.heldout
    full = os.path.join(work, "full.nc")
    model = os.path.join(work, "model.nc")
    index_of = {label: os.path.join(work, f"model-{label}.ann") for label in labels}
    # --reuse: the data and model of --work (and any index already there, kept with its times
    # from --reuse-times); the missing indexes are built.
    reuse = args.reuse and all(os.path.exists(f) for f in (full, model))
    if reuse and not args.reuse_times:
        result["reused_from_commit"] = "unknown (no --reuse-times)"
        result["generate_s"] = result["train_s"] = None
        result["model_file_bytes"] = os.path.getsize(model)
    elif reuse:
        before = json.load(open(args.reuse_times))
        before = before["shapes"] if "shapes" in before else [before]
        before = next(b for b in before if b["label"] == args.label)
        result["reused_from_commit"] = before.get("commit")
        for key in ("generate_s", "train_s", "indexes", "model_file_bytes"):
            if key in before:
                result[key] = before[key]
    else:
        _, result["generate_s"] = run([cli, "generate", "-o", full, "--users", users, "--items",
                                       args.items, "--nnz", users * args.per_user, "--seed", 7,
                                       "--threads", args.threads, "-q"])
    data = sparsenet.Dataset.load(full, "gl_input")
    import scipy.sparse as sp

    csr = sp.csr_matrix(data.to_scipy())
    train = csr[:args.users]
    held = csr[args.users:]
    del data
    train_nc = os.path.join(work, "train.nc")
    cfg = os.path.join(work, "net.json")
    if not reuse:
        sparsenet.write_datasets(train_nc, [sparsenet.Dataset.from_scipy(train, "gl_input"),
                                            sparsenet.Dataset.from_scipy(train, "gl_output")])
        with open(cfg, "w") as f:
            json.dump(config(args.hidden, args.softmax), f)
        cmd = [cli, "train", "-c", cfg, "-i", train_nc, "-n", model, "-b", args.batch, "-e",
               args.epochs, "--optimizer", args.optimizer, "--learning-rate", args.learning_rate,
               "--device", "cpu", "--threads", args.threads, "-q"]
        if args.optimizer == "adam":
            cmd += ["--sparse-updates", "lazy"]
        if args.steps:
            cmd += ["--steps", args.steps]
        _, result["train_s"] = run(cmd)
    queries = [list(map(int, held.indices[held.indptr[r]:held.indptr[r + 1]]))
               for r in range(held.shape[0])]
    queries = [q for q in queries if q]
    result["heldout_users"] = len(queries)

    # 2. the indexes, one per kind and precision of the vectors (with --reuse, those of --work
    # whose times --reuse-times has are kept)
    result.setdefault("indexes", {})
    result["reused_indexes"] = []
    for (kind, vectors), label in zip(configs, labels):
        if reuse and os.path.exists(index_of[label]) and label in result["indexes"]:
            result["reused_indexes"].append(label)
            continue
        cmd = [cli, "ann-index", "-n", model, "-o", index_of[label], "--kind", kind,
               "--threads", args.build_threads or args.threads, "--vectors", vectors]
        if kind == "hnsw":
            cmd += ["--hnsw-m", args.hnsw_m, "--ef-construction", args.ef_construction]
        if kind == "ivf" and args.cells:
            cmd += ["--cells", args.cells]
        out, wall = run(cmd)
        log(out.strip())
        m = re.search(r"in ([\d.]+) s; (\d+) bytes \(([\d.]+) per item\)", out)
        result["indexes"][label] = {"kind": kind, "vectors": vectors, "build_s": float(m[1]),
                                    "build_wall_s": wall, "file_bytes": int(m[2]),
                                    "bytes_per_item": float(m[3]), "report": out.strip()}
    result["index"] = result["indexes"][labels[0]]
    result["model_file_bytes"] = os.path.getsize(model)

    # 3. in process: exact and the curves
    exact = sparsenet.Recommender(model, device="cpu", fp16_screening=True)
    timed = queries if not args.exact_queries else queries[:args.exact_queries]
    exact_scores = []
    exact_ids, exact_lat = timed_queries(exact, timed, args.k, exact_scores)
    if len(timed) < len(queries):
        # The rest untimed, 16 queries per scan of the fp16 copy: the same answers as alone.
        rest = exact.recommend_batch(queries[len(timed):], args.k)
        exact_ids += [list(r.ids) for r in rest]
        exact_scores += [list(r.scores) for r in rest]
    result["exact_in_process"] = {"queries": len(timed), "p50_ms": percentile(exact_lat, 50) * 1e3,
                                  "p99_ms": percentile(exact_lat, 99) * 1e3,
                                  "queries_per_s": len(exact_lat) / sum(exact_lat)}
    # How much the exact answers depend on the query: a model whose top-100 is the same popular
    # items for everyone makes any index's recall easy.
    first = [set(ids) for ids in exact_ids[:40]]
    pairs = [len(a & b) / max(1, len(a)) for i, a in enumerate(first) for b in first[i + 1:]]
    result["exact_in_process"]["mean_overlap_of_users_top_k"] = float(np.mean(pairs)) if pairs else None
    log(f"exact in process: {result['exact_in_process']}")
    del exact
    curves = [(label, kind, False) for (kind, _), label in zip(configs, labels)]
    if args.bf16_input:
        curves.append((labels[0], configs[0][0], True))
    result["curves"] = {}
    for label, kind, bf16_input in curves:
        name = label + ("+bf16-input" if bf16_input else "")
        curve = []
        for p in probes_of[kind]:
            ann = sparsenet.Recommender(model, device="cpu", ann_index=index_of[label],
                                        ann_probe=p, bf16_input_weights=bf16_input)
            scores = []
            ids, lat = timed_queries(ann, queries, args.k, scores)
            point = {"probe": p, "recall_at_100": recall(ids, exact_ids),
                     "tie_recall_at_100": tie_recall(scores, exact_scores),
                     "p50_ms": percentile(lat, 50) * 1e3, "p99_ms": percentile(lat, 99) * 1e3,
                     "queries_per_s": len(lat) / sum(lat),
                     "fallbacks": ann._native.ann_fallbacks,
                     "ann_memory_bytes": ann.ann_memory_bytes,
                     "released_bytes": ann.released_bytes}
            log(f"{name} probe {p}: {point}")
            curve.append(point)
            del ann
        result["curves"][name] = curve
    result["curve"] = result["curves"][labels[0]]
    curve = result["curve"]
    if args.peers:
        import peers

        cells = args.cells or default_cells(args.items)
        vectors, h = peers.query_activations(model, queries, args.threads)
        ivf = {label: index_of[label] for (kind, _), label in zip(configs, labels) if kind == "ivf"}
        ivf.update(dict(spec.split("=", 1) for spec in args.extra_index))
        result["search_alone"] = peers.search_alone(
            os.path.abspath(args.search_bench), model, ivf, h, queries, exact_ids, args, cells,
            probes_of["ivf"], work)
        if not args.no_python_peers:
            result["peers"] = peers.python_peers(vectors, h, queries, exact_ids, args, cells,
                                                 probes_of["ivf"], probes_of["hnsw"])
        del vectors
    if args.skip_serve:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        log(f"wrote {args.out}")
        return
    serve_probe = args.serve_probe or next(
        (c["probe"] for c in curve if c["recall_at_100"] >= 0.95), curve[-1]["probe"])
    result["serve_probe"] = serve_probe

    # 4. over HTTP: exact, the first index ("ann") and with --bf16-input the same index with
    # the input layer in BF16 ("ann-after")
    bodies = os.path.join(work, "bodies.txt")
    with open(bodies, "w") as f:
        for q in queries:
            f.write(json.dumps({"items": q, "k": args.k}, separators=(",", ":")) + "\n")
    index = index_of[labels[0]]
    runs = [] if args.skip_exact_serve else serve_runs(cli, model, [], bodies, args, "exact")
    runs += serve_runs(cli, model, ["--ann", index, "--ann-probe", str(serve_probe)], bodies,
                       args, "ann")
    if args.bf16_input:
        runs += serve_runs(cli, model, ["--ann", index, "--ann-probe", str(serve_probe),
                                        "--bf16-input-weights"], bodies, args, "ann-after")
        result["after"] = {"index": labels[0], "bf16_input_weights": True}
    result["serve"] = runs
    result["load_after"] = open("/proc/loadavg").read().split()[:3]
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()

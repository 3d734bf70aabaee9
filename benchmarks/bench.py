#!/usr/bin/env python3
"""Benchmark driver: runs a workload for sparsenet and for each peer alternately, repeats, and
prints a table of medians and ratios; writes benchmarks/results/<date>-<machine>-<workload>.json.

Workloads (../shared/design/performance.md), both on a user subset of --users users of the
ML-20M shape (same mean row length, 144.4), which keeps a run short:
  dsstne-bench  DSSTNE's benchmark network (its config, unmodified), SGD, batch 256;
  mult-dae      configs/mult-dae.json: I -> 600 -> 200 -> 600 -> I, tanh, softmax +
                multinomial cross-entropy, input dropout 0.5, Adam 1e-3, batch 500.
--batch 64,128,256 sweeps batch sizes (time per epoch vs batch size).

Peers (benchmarks/peers/): PyTorch, competent (sparse first layer) and densify-each-batch.
--precisions fp32,bf16 (the default) runs each of sparsenet and PyTorch's sparse variant in both:
sparsenet --precision bf16 ("sparsenet bf16") and PyTorch's bf16 autocast ("pytorch-sparse bf16").
Each system trains --epochs epochs; the figure is the time of the epoch loop as the system
reports it (sparsenet: --metrics-out; peers: their own timer), so process start and data loading
are excluded for everyone.

sgemm_gflops: after each repetition the machine's sgemm rate at the output layer's three training
shapes (forward, input delta, weight gradient: build/benchmarks/sparsenet_bench_sgemm, the same
OpenBLAS and thread count), so the epoch's model-FLOP rate can be read as a fraction of it
(sgemm_fraction) under the same load. bf16_gflops: likewise the CPU backend's BF16 matmul rate
at the same shapes (build/benchmarks/sparsenet_bench_bf16_matmul: the kernel `--precision bf16`
runs, with the engine's padded layouts), and bf16_fraction. core_peaks: one core's FMA,
vdpbf16ps and AMX tile rates before and after the runs (build/benchmarks/sparsenet_bench_bf16_dot,
nothing read from memory), which tell a slow hour's cores from its memory. The result names the
CPU, its BF16 instructions (cpu_isa) and the kernel sparsenet's bf16 ran (bf16_kernel).
--baseline-build DIR adds DIR's sparsenet as the system "sparsenet-base", run alternately with
the new one (an A/B on a shared machine). --variant-env NAME=VALUE (repeatable) adds this build's
sparsenet with that variable set as the system "sparsenet NAME=VALUE", and "sparsenet bf16
NAME=VALUE" where bf16 runs (a switch of the step turned off: SPARSENET_PADDED_LD=0; a kernel
forced: SPARSENET_CPU_BF16_KERNEL=emulation).

usage: benchmarks/bench.py [--build build] [--python PY] [--workload dsstne-bench|mult-dae]
       [--users 8192] [--repeats 3] [--threads 2] [--batch N[,N...]] [--no-peers] [--tag T]
       [--baseline-build DIR] [--variant-env NAME=VALUE ...] [--sgemm-repeats 3]
       [--precisions fp32,bf16]
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

from cpuinfo import cpu_isa, cpu_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ITEMS, USERS, NNZ = 27278, 138493, 20000263


def run(cmd, stderr_too=False, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return (r.stdout, r.stderr) if stderr_too else r.stdout


def layer_sizes(cfg_path, items):
    return [int(l["N"]) if l["N"] != "auto" else items for l in json.load(open(cfg_path))["Layers"]]


def flops_per_example(cfg_path, items, mean_nnz):
    """Multiply-adds x 2 of forward + backward (dX and dW) per example."""
    sizes = layer_sizes(cfg_path, items)
    total = 0.0
    for i in range(1, len(sizes)):
        if i == 1:  # sparse input: gather forward, scatter gradient; no input delta
            total += 2 * 2 * mean_nnz * sizes[1]
        else:
            total += 3 * 2 * sizes[i - 1] * sizes[i]
    return total


WORKLOADS = {
    # name: (config, default batch, extra sparsenet train flags)
    # DSSTNE's benchmark network (benchmarks/benchmarks_dsstne_config.json), the project's copy.
    "dsstne-bench": (os.path.join(ROOT, "configs", "dsstne-bench.json"), 256, []),
    # Adam's sparse-input rows updated lazily on both sides: the peer's SparseAdam is lazy.
    "mult-dae": (os.path.join(ROOT, "configs", "mult-dae.json"), 500,
                 ["--sparse-updates", "lazy"]),
}


def bf16_kernel_name(rate):
    """The bf16 rate program's kernel, e.g. "onednn brg:avx512_core_amx_bf16, weight gradient
    amx_gemm_tn"."""
    name = f"{rate['kernel']} {rate['implementation']}".strip()
    wg = rate.get("weight_gradient_kernel")
    if wg and wg != rate["implementation"]:
        name += f", weight gradient {wg}"
    return name


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.join(ROOT, "benchmarks", ".venv", "bin", "python"))
    p.add_argument("--workload", default="dsstne-bench", choices=sorted(WORKLOADS))
    p.add_argument("--users", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", default=None,
                   help="batch size, or a comma list for a sweep (default: the workload's)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "sparsenet-bench"))
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--tag", default="", help="suffix of the results file name")
    p.add_argument("--baseline-build", default=None,
                   help="another build whose sparsenet runs alternately as 'sparsenet-base' "
                   "(in each precision asked for)")
    p.add_argument("--variant-env", action="append", default=[], metavar="NAME=VALUE",
                   help="also run this build with NAME=VALUE in the environment")
    p.add_argument("--sgemm-repeats", type=int, default=3,
                   help="timed calls per shape of each sgemm measurement (0: skip it)")
    p.add_argument("--precisions", default="fp32,bf16",
                   help="comma list of fp32 and bf16: the precisions sparsenet and PyTorch's "
                        "sparse variant run in")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sparsenet = os.path.join(a.build, "sparsenet")
    config, default_batch, extra_flags = WORKLOADS[a.workload]
    batches = [int(b) for b in (a.batch or str(default_batch)).split(",")]
    nnz = round(NNZ / USERS * a.users)
    data = os.path.join(a.work, f"ml20m-shape-{a.users}.nc")
    if not os.path.exists(data):
        run([sparsenet, "generate", "-o", data, "--users", str(a.users), "--items", str(ITEMS),
             "--nnz", str(nnz), "--seed", "1", "-q"])
    info = json.loads(run([sparsenet, "info", "--json", data]))
    ds = info["files"][0]["datasets"][0]
    examples, mean_nnz = ds["examples"], ds["nonzeros"] / ds["examples"]

    precisions = a.precisions.split(",")
    if not precisions or any(p not in ("fp32", "bf16") for p in precisions):
        sys.exit(f"--precisions: expected a comma list of fp32 and bf16, got {a.precisions}")
    bf16_kernel = {}  # the line `train --precision bf16` logs: the kernel its GEMMs ran

    def ours(batch, sparsenet=sparsenet, env=None, precision="fp32"):
        metrics = os.path.join(a.work, "metrics.jsonl")
        _, err = run([sparsenet, "train", "-c", config, "-i", data,
                      "-n", os.path.join(a.work, "m.nc"), "-b", str(batch), "-e", str(a.epochs),
                      "--threads", str(a.threads), "--precision", precision,
                      "--metrics-out", metrics, "-q"] + extra_flags,
                     stderr_too=True, env=dict(os.environ, **env) if env else None)
        for line in err.splitlines():
            if "bf16 GEMMs ->" in line:
                bf16_kernel[line.split(": ", 1)[-1]] = True
        lines = [json.loads(l) for l in open(metrics)]
        return [l["seconds"] for l in lines], [l["loss"] for l in lines]

    def peer(variant, bf16=False):
        def go(batch):
            out = run([a.python, os.path.join(ROOT, "benchmarks", "peers", "torch_autoencoder.py"),
                       "--config", config, "--data", data, "--variant", variant,
                       "--batch", str(batch), "--epochs", str(a.epochs),
                       "--threads", str(a.threads)] + (["--bf16"] if bf16 else []))
            r = json.loads(out.strip().splitlines()[-1])
            return r["seconds"], r["loss"]
        return go

    systems = {}
    if "fp32" in precisions:
        systems["sparsenet"] = ours
    if "bf16" in precisions:
        systems["sparsenet bf16"] = lambda batch: ours(batch, precision="bf16")
    versions = {"sparsenet": run([sparsenet, "--version"]).strip()}
    if a.baseline_build:
        base_bin = os.path.join(a.baseline_build, "sparsenet")
        for precision in precisions:  # in each precision asked for, as sparsenet itself
            label = "sparsenet-base bf16" if precision == "bf16" else "sparsenet-base"
            systems[label] = (lambda batch, precision=precision: ours(
                batch, base_bin, precision=precision))
        versions["sparsenet-base"] = run([base_bin, "--version"]).strip()
    for assignment in a.variant_env:  # in each precision asked for, as sparsenet itself
        name, _, value = assignment.partition("=")
        for precision in precisions:
            label = "sparsenet bf16" if precision == "bf16" else "sparsenet"
            systems[f"{label} {name}={value}"] = (
                lambda batch, env={name: value}, precision=precision: ours(
                    batch, env=env, precision=precision))
    sgemm = next((p for p in (os.path.join(a.build, "benchmarks", "sparsenet_bench_sgemm"),
                              os.path.join(ROOT, "build", "benchmarks", "sparsenet_bench_sgemm"))
                  if os.path.exists(p)), None)
    if sgemm is None and a.sgemm_repeats > 0:
        print("note: sparsenet_bench_sgemm not built: no sgemm_gflops", file=sys.stderr)
    bf16_bench = next((p for p in (os.path.join(a.build, "benchmarks", "sparsenet_bench_bf16_matmul"),
                                   os.path.join(ROOT, "build", "benchmarks",
                                                "sparsenet_bench_bf16_matmul"))
                       if os.path.exists(p)), None)
    if "bf16" not in precisions:
        bf16_bench = None
    # One core's instruction peaks (FP32 FMA, vdpbf16ps, AMX tiles; nothing read from memory),
    # before the runs and after: a slow hour of a shared machine shows in them, or, where they
    # hold while the GEMM rates fall, it is the memory that is slow (docs/benchmarks.md).
    peaks_program = next((p for p in (os.path.join(a.build, "benchmarks", "sparsenet_bench_bf16_dot"),
                                      os.path.join(ROOT, "build", "benchmarks",
                                                   "sparsenet_bench_bf16_dot"))
                          if os.path.exists(p)), None)

    def core_peaks():
        if peaks_program is None:
            return None
        out = subprocess.run([peaks_program], capture_output=True, text=True)
        if out.returncode != 0:  # no AVX-512: the program says so and exits 1
            return None
        peaks = json.loads(out.stdout.strip().splitlines()[-1])
        peaks.pop("sink", None)
        print("  core peaks: " + ", ".join(f"{k} {v}" for k, v in peaks.items()
                                           if k != "instructions"), flush=True)
        return peaks
    peaks_before = core_peaks()
    sizes = layer_sizes(config, ITEMS)

    def sgemm_rate(batch, program):
        out = run([program, str(batch), str(sizes[-2]), str(sizes[-1]), str(a.threads),
                   str(a.sgemm_repeats)])
        return json.loads(out.strip().splitlines()[-1])
    if not a.no_peers:
        if not os.path.exists(a.python):
            sys.exit(f"{a.python} not found: run `make bench` (it creates the venv) or --no-peers")
        if "fp32" in precisions:
            systems["pytorch-sparse"] = peer("sparse")
        if "bf16" in precisions:
            systems["pytorch-sparse bf16"] = peer("sparse", bf16=True)
        if "fp32" in precisions:
            systems["pytorch-densify"] = peer("densify")
        versions["torch"] = run([a.python, "-c", "import torch; print(torch.__version__)"]).strip()

    flop = flops_per_example(config, ITEMS, mean_nnz) * examples
    rows = []
    for batch in batches:
        times = {name: [] for name in systems}
        losses = {name: [] for name in systems}
        sgemm_runs, bf16_runs = [], []
        for r in range(a.repeats):  # alternate systems within each repetition
            for name, go in systems.items():
                epoch_seconds, epoch_losses = go(batch)
                times[name].append(statistics.median(epoch_seconds))
                losses[name].append(epoch_losses[-1])
                print(f"  batch {batch} repeat {r + 1}/{a.repeats} {name:16s} "
                      f"{times[name][-1]:.2f} s/epoch (loss {epoch_losses[-1]:.4g})", flush=True)
            if sgemm is not None and a.sgemm_repeats > 0:
                sgemm_runs.append(sgemm_rate(batch, sgemm))
                print(f"  batch {batch} repeat {r + 1}/{a.repeats} sgemm at the output layer "
                      f"{sgemm_runs[-1]['gflops']:.1f} GFLOP/s", flush=True)
            if bf16_bench is not None and a.sgemm_repeats > 0:
                bf16_runs.append(sgemm_rate(batch, bf16_bench))
                kernel = bf16_kernel_name(bf16_runs[-1])
                print(f"  batch {batch} repeat {r + 1}/{a.repeats} bf16 matmul at the output "
                      f"layer {bf16_runs[-1]['gflops']:.1f} GFLOP/s ({kernel})", flush=True)
        sgemm_gflops = (statistics.median(s["gflops"] for s in sgemm_runs) if sgemm_runs
                        else None)
        bf16_gflops = (statistics.median(s["gflops"] for s in bf16_runs) if bf16_runs
                       else None)
        base = statistics.median(times["sparsenet" if "sparsenet" in times else "sparsenet bf16"])
        print(f"\n{a.workload}: {examples} users x {ITEMS} items ({mean_nnz:.1f} per user), batch "
              f"{batch}, {a.threads} threads, {cpu_model()}; median of {a.repeats}")
        if sgemm_gflops:
            print(f"sgemm at the output layer's shapes ({batch} x {sizes[-2]} x {sizes[-1]}): "
                  f"{sgemm_gflops:.1f} GFLOP/s (median of {len(sgemm_runs)})")
        if bf16_gflops:
            kernel = bf16_kernel_name(bf16_runs[0])
            print(f"bf16 matmul at the same shapes: {bf16_gflops:.1f} GFLOP/s (median of "
                  f"{len(bf16_runs)}; {kernel})")
        print(f"{'system':20s} {'s/epoch':>8s} {'users/s':>9s} {'GFLOP/s':>8s} "
              f"{'of sgemm':>8s} {'of bf16':>8s} {'sparsenet speedup':>18s} {'last loss':>10s}")
        for name, ts in times.items():
            med = statistics.median(ts)
            gflops = flop / med / 1e9
            row = {"system": name, "batch": batch, "seconds": ts, "median_s": med,
                   "users_per_s": examples / med, "gflops": gflops,
                   "sparsenet_speedup": med / base, "loss": losses[name]}
            if sgemm_gflops:
                row.update({"sgemm_gflops": sgemm_gflops, "sgemm_fraction": gflops / sgemm_gflops,
                            "sgemm_runs": sgemm_runs})
            if bf16_gflops:
                row.update({"bf16_gflops": bf16_gflops, "bf16_fraction": gflops / bf16_gflops,
                            "bf16_runs": bf16_runs})
            rows.append(row)
            frac = f"{100 * gflops / sgemm_gflops:7.1f}%" if sgemm_gflops else f"{'-':>8s}"
            frac16 = f"{100 * gflops / bf16_gflops:7.1f}%" if bf16_gflops else f"{'-':>8s}"
            print(f"{name:20s} {med:8.2f} {examples / med:9.0f} {gflops:8.1f} {frac} {frac16} "
                  f"{med / base:17.2f}x {statistics.median(losses[name]):10.4g}")
        print()
    peaks_after = core_peaks()
    result = {
        "benchmark": a.workload, "date": datetime.date.today().isoformat(),
        "machine": platform.node(), "cpu": cpu_model(), "cpu_isa": cpu_isa(),
        "threads": a.threads, "bf16_kernel": sorted(bf16_kernel),
        # ONEDNN_MAX_CPU_ISA caps oneDNN's ISA for both engines (PyTorch bundles oneDNN too):
        # AVX512_CORE_BF16 stands in for a CPU without AMX.
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        "versions": versions,
        "core_peaks": {"before": peaks_before, "after": peaks_after},
        "commit": run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip(),
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "workload": {"users": examples, "items": ITEMS, "mean_row": mean_nnz, "batches": batches,
                     "epochs": a.epochs, "config": os.path.basename(config),
                     "sparsenet_flags": extra_flags, "flop_per_epoch": flop,
                     "output_layer": {"in": sizes[-2], "out": sizes[-1]}},
        "results": rows,
    }
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    name = f"{result['date']}-{platform.node()}-{a.workload}{'-' + a.tag if a.tag else ''}.json"
    path = os.path.join(ROOT, "benchmarks", "results", name)
    json.dump(result, open(path, "w"), indent=2)
    print("wrote", os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()

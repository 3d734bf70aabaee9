#!/usr/bin/env python3
"""Bytes one training step moves, from a model of the step: each pass's reads and writes.

The memory floor of a step on a device is bytes / bandwidth: a fused step of dsstne-bench
(FP32 storage) moves about 0.8 GB, 0.24 ms at an H100's 3.35 TB/s. The model follows the
engine's passes (src/engine/network_passes.cpp) for feed-forward networks of one sparse input
layer, fully connected hidden layers and one output layer with sparse targets; each pass is
(name, bytes read, bytes written). Two variants:

  fused   the step of issue 33: the optimizer step inside the weight-gradient GEMM (SGD as
          C = W; Momentum on the velocity and one add; Adam as one epilogue pass over the
          gradient, both moments and the weights), one output epilogue pass per row (z + bias,
          activation, the loss's delta written over z), bias / activation / dropout in one pass
          per hidden layer and the derivative with the column sums in one pass, the non-finite
          guard as flags raised by those passes (no bytes of its own);
  unfused the passes as separate kernels: the dense gradient written by its GEMM then read by
          the optimizer, four passes over the output (bias + activation, delta, loss, column
          sum), separate hidden-layer passes, the guard's sums of squares over every activation.

The precisions of the GEMMs (--precision; storage stays FP32, value_bytes):

  fp32           (and tf32: the same bytes) every GEMM reads its FP32 operands;
  bf16           the engine now (issue 46): each weight matrix a GEMM reads keeps a BF16 copy
                 written by the step (2 B a weight written in the optimizer's pass, or one
                 conversion pass, 4 B read + 2 B written, after a step inside the weight-gradient
                 GEMM: SGD, Momentum), which the forward and input-delta GEMMs read (2 B a
                 weight); each activation and delta a GEMM reads is written in BF16 (2 B, beside
                 its FP32 value) by the kernel that produces it (bias + activation + dropout,
                 the derivative + column sums, the output epilogue), and every GEMM reads that
                 copy (2 B a value): no conversion pass of an activation or a delta is left;
                 results, the sparse input's gather and every element-wise pass stay FP32;
  bf16-weight-copies  the engine with SPARSENET_BF16_ACTIVATION_COPIES=0 (and before the
                 producers' copies): the weights' copies as above, activations and deltas
                 converted per GEMM (4 B read, 2 B written, then 2 B read by the GEMM);
  bf16-per-gemm  the engine before issue 46: every BF16 GEMM converts both operands, the
                 weights included, per GEMM;
  bf16-fused     not built (a target for issue 46's GPU work): bf16, with the weights' copy
                 also written inside the pass that updates them where that pass is the
                 weight-gradient GEMM (its epilogue for SGD; the velocity add for Momentum), so
                 no conversion pass is left at all.

Only operands and results count: GEMMs read each operand once and write the result once (tiles
that re-read an operand from cache count nothing); a gathered input row is read once per batch
(distinct rows: --distinct, default the expectation for uniformly drawn items). Scalars, the
CSR indices' own offsets and anything under 1 KB are left out.

Used by benchmarks (and scripts/gpu-validate) as a module:
    import step_model
    m = step_model.model("dsstne-bench")             # or model(config_path, batch=...)
    step_model.bytes_per_step(m)                     # fused
    step_model.model("dsstne-bench", precision="bf16")
    step_model.floor_seconds(m, bandwidth=3.35e12, examples=138493)
or from the command line:
    benchmarks/step_model.py --workload dsstne-bench --bandwidth 3.35e12 [--unfused] [--json]
        [--precision fp32|bf16|bf16-weight-copies|bf16-per-gemm|bf16-fused]
"""
import argparse
import json
import math
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ITEMS, USERS, NNZ = 27278, 138493, 20000263  # the ML-20M shape of benchmarks/bench.py

# Workloads of benchmarks/bench.py: config, batch, optimizer.
WORKLOADS = {
    "dsstne-bench": (os.path.join(ROOT, "configs", "dsstne-bench.json"), 256, "sgd"),
    "mult-dae": (os.path.join(ROOT, "configs", "mult-dae.json"), 500, "adam"),
}

# The GEMMs' precisions the model knows (module docstring).
PRECISIONS = ("fp32", "bf16", "bf16-weight-copies", "bf16-per-gemm", "bf16-fused")

# Optimizer state slots per parameter (src/kernels/formulas/optimizer.h).
STATE_SLOTS = {"sgd": 0, "momentum": 1, "nesterov": 1, "adagrad": 1, "rmsprop": 1,
               "adadelta": 2, "adam": 2, "adamw": 2}


def expected_distinct(draws, items):
    """Distinct items among `draws` uniform draws from `items` (an upper bound for skewed data)."""
    if items <= 0:
        return 0.0
    return items * (1.0 - math.exp(-draws / items))


def model(workload_or_config, batch=None, optimizer=None, mean_nnz=None, items=ITEMS,
          distinct=None, dropout=None, value_bytes=4, precision="fp32"):
    """The step's shape: layer widths, batch, input nonzeros per row, optimizer, dropout, and
    the GEMMs' precision (PRECISIONS)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if workload_or_config in WORKLOADS:
        config, default_batch, default_opt = WORKLOADS[workload_or_config]
    else:
        config, default_batch, default_opt = workload_or_config, 256, "sgd"
    with open(config) as fh:
        cfg = json.load(fh)
    layers = cfg["Layers"]
    sizes = [int(l["N"]) if l["N"] != "auto" else items for l in layers]
    drop = [float(l.get("pDropout", 0.0)) > 0.0 for l in layers]
    opt = (optimizer or cfg.get("Training", {}).get("Optimizer", default_opt)).lower()
    b = batch or default_batch
    nnz = mean_nnz if mean_nnz is not None else NNZ / USERS
    return {
        "sizes": sizes, "batch": b, "mean_nnz": nnz, "optimizer": opt,
        "dropout": dropout if dropout is not None else drop,
        "distinct": distinct if distinct is not None else expected_distinct(b * nnz, sizes[0]),
        "value_bytes": value_bytes, "precision": precision,
    }


def passes(m, fused=True):
    """[(name, bytes read, bytes written)] of one step, in the order the engine runs them."""
    f = m["value_bytes"]
    B, sizes, nnz = m["batch"], m["sizes"], m["mean_nnz"]
    slots = STATE_SLOTS[m["optimizer"]]
    out = []
    entries = B * nnz
    n1 = sizes[1]
    L = len(sizes) - 1  # index of the output layer

    def act_pass(name, n, reads, writes):  # element-wise over a [B, n] matrix
        out.append((name, reads * B * n * f, writes * B * n * f))

    precision = m.get("precision", "fp32")
    bf16 = precision != "fp32"
    # the weights' BF16 copies kept by the step
    copies = precision in ("bf16", "bf16-weight-copies", "bf16-fused")
    # activations and deltas written in BF16 by the kernels that produce them
    producers = precision in ("bf16", "bf16-fused")
    # the weights' copy written by the pass that updates them, even inside the gradient GEMM
    in_update = precision == "bf16-fused"
    produced = set()

    def gemm(name, operands, written):
        """A GEMM: operands [(what, elements, is_weight)], `written` FP32 bytes of its result.
        In bf16 an operand without a BF16 copy is converted first (a pass of its own)."""
        read = 0
        for what, elems, weight in operands:
            if not bf16:
                read += elems * f
            elif weight and copies:  # the copy the step wrote
                read += elems * 2
            elif producers:  # written once by its producer (2 B more), read by each GEMM
                if what not in produced:
                    produced.add(what)
                    out.append((f"+ bf16 copy of {what} in its producer's pass", 0,
                                elems * 2))
                read += elems * 2
            else:
                out.append((f"bf16 conversion of {what} for {name}", elems * f, elems * 2))
                read += elems * 2
        return read, written

    # ---- forward ----
    # Sparse input: every distinct stored row of W_in once, the CSR (index + value), z1 written.
    out.append(("input gather (csr_matmul)", m["distinct"] * n1 * f + entries * 8, B * n1 * f))
    for l in range(1, L + 1):
        n_in, n = sizes[l - 1], sizes[l]
        if l > 1:
            name = f"gemm forward {l}"
            out.append((name, *gemm(name, [(f"a{l - 1}", B * n_in, False),
                                           (f"W{l}", n_in * n, True)], B * n * f)))
        if l == L:
            if fused:  # z + bias, activation, delta over z, loss, bias-gradient partials
                out.append(("output epilogue", B * n * f + entries * 8, B * n * f))
            else:  # bias + activation; delta (reads a and the targets); column sum of delta
                act_pass("output bias + activation", n, 1, 1)
                out.append(("output delta + loss", B * n * f + entries * 8, B * n * f))
                act_pass("output bias gradient (column sum)", n, 1, 0)
        elif fused:
            act_pass(f"hidden {l} bias + activation + dropout", n, 1, 1)
        else:
            act_pass(f"hidden {l} bias + activation", n, 1, 1)
            if m["dropout"][l]:
                act_pass(f"hidden {l} dropout", n, 1, 1)

    # ---- backward and update ----
    def dense_update(l, n_in, n):
        w = n_in * n * f
        copy = n_in * n * 2 if copies else 0  # the BF16 copy the step writes

        def operands(name):  # the activations and the delta, never weights
            return gemm(name, [(f"a{l - 1}", B * n_in, False), (f"dz{l}", B * n, False)], 0)[0]

        if fused and m["optimizer"] in ("sgd", "momentum"):
            sgd = m["optimizer"] == "sgd"
            name = f"gemm weight gradient + SGD {l}" if sgd else \
                f"gemm weight gradient into velocity {l}"
            # bf16-fused: the pass that writes W writes its copy too.
            in_pass = copy if in_update else 0
            out.append((name, operands(name) + w, w + (in_pass if sgd else 0)))
            if not sgd:
                out.append((f"weights += velocity {l}", 2 * w, w + in_pass))
            if copies and not in_update:  # the GEMM's epilogue writes FP32 only: one more pass
                out.append((f"bf16 copy of W{l} after the step", w, copy))
        else:  # GEMM writes g, one pass reads g, the state, w; writes the state, w (its copy)
            name = f"gemm weight gradient {l}"
            out.append((name, operands(name), w))
            step = f"optimizer epilogue {l}" if fused else f"optimizer {l}"
            out.append((step, (2 + slots) * w, (1 + slots) * w + copy))

    for l in range(L, 0, -1):
        n_in, n = sizes[l - 1], sizes[l]
        if l < L:  # dL/da -> dL/dz (+ the bias gradient's column sums)
            if fused:
                out.append((f"hidden {l} derivative + column sums", 2 * B * n * f, B * n * f))
            else:
                act_pass(f"hidden {l} activation derivative", n, 2, 1)
                act_pass(f"hidden {l} bias gradient (column sum)", n, 1, 0)
        if l > 1:
            dense_update(l, n_in, n)
            name = f"gemm input delta {l}"
            out.append((name, *gemm(name, [(f"dz{l}", B * n, False), (f"W{l}", n_in * n, True)],
                                    B * n_in * f)))
        else:  # sparse input: per touched row, the sum of its entries' dz rows and the update
            rows = m["distinct"] * n1 * f
            out.append(("input weight gradient + update",
                        entries * 8 + B * n1 * f + (1 + slots) * rows, (1 + slots) * rows))
        if not fused:
            out.append((f"bias update {l}", (2 + slots) * n * f, (1 + slots) * n * f))
    if not fused:  # the guard: sums of squares over every activation and bias gradient
        for l in range(1, L + 1):
            act_pass(f"guard layer {l}", sizes[l], 1, 0)
    return out


def bytes_per_step(m, fused=True):
    return sum(r + w for _, r, w in passes(m, fused))


def conversions_gone(m, fused=True):
    """The per-GEMM conversion passes of activations and deltas that the producers' BF16 copies
    removed (bf16-weight-copies against bf16): [(name, bytes read + written)], and the bytes
    the producers' copies add instead (2 B per value written beside the FP32 value)."""
    before = passes(dict(m, precision="bf16-weight-copies"), fused)
    now = passes(dict(m, precision="bf16"), fused)
    gone = [(n, r + w) for n, r, w in before if n.startswith("bf16 conversion")]
    added = sum(r + w for n, r, w in now if n.startswith("+ bf16 copy"))
    return gone, added


def floor_seconds(m, bandwidth, examples=None, fused=True):
    """Seconds per step at `bandwidth` bytes/s, or per epoch of `examples` rows."""
    step = bytes_per_step(m, fused) / bandwidth
    return step if examples is None else step * math.ceil(examples / m["batch"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="dsstne-bench", help=", ".join(sorted(WORKLOADS)) +
                   " or a config path")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--optimizer", default=None)
    p.add_argument("--distinct", type=float, default=None,
                   help="distinct input rows per batch (default: uniform expectation)")
    p.add_argument("--bandwidth", type=float, default=3.35e12, help="bytes/s (H100 SXM: 3.35e12)")
    p.add_argument("--examples", type=int, default=USERS)
    p.add_argument("--unfused", action="store_true", help="the separate-pass variant")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="the GEMMs' precision (default fp32; tf32 moves fp32's bytes)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    m = model(a.workload, batch=a.batch, optimizer=a.optimizer, distinct=a.distinct,
              precision=a.precision)
    fused = not a.unfused
    total = bytes_per_step(m, fused)
    # The step's bytes in each precision, side by side.
    by_precision = {p: bytes_per_step(dict(m, precision=p), fused) for p in PRECISIONS}
    gone, added = conversions_gone(m, fused)
    result = {"workload": a.workload, "variant": "fused" if fused else "unfused",
              "model": m, "bytes_per_step": total, "bandwidth": a.bandwidth,
              "floor_s_per_step": total / a.bandwidth,
              "floor_s_per_epoch": floor_seconds(m, a.bandwidth, a.examples, fused),
              "examples": a.examples, "bytes_per_step_by_precision": by_precision,
              "conversions_gone": [{"pass": n, "bytes": b} for n, b in gone],
              "producer_copy_bytes": added,
              "passes": [{"pass": n, "read": r, "written": w} for n, r, w in passes(m, fused)]}
    if a.json:
        print(json.dumps(result, indent=2))
        return
    for n, r, w in passes(m, fused):
        print(f"{n:45s} {r / 1e6:10.1f} MB read {w / 1e6:10.1f} MB written")
    print("per step: " + ", ".join(f"{p} {b / 1e6:.1f} MB" for p, b in by_precision.items()) +
          f" (bf16 / fp32: {by_precision['bf16'] / by_precision['fp32']:.3f})")
    print(f"gone with the producers' BF16 copies (bf16-weight-copies -> bf16): {len(gone)} "
          f"conversion passes, {sum(b for _, b in gone) / 1e6:.1f} MB, for "
          f"{added / 1e6:.1f} MB of copies written by the producers: " +
          ", ".join(n.replace("bf16 conversion of ", "") for n, _ in gone))
    print(f"{a.workload} ({result['variant']}, {a.precision}): {total / 1e6:.1f} MB per step; at "
          f"{a.bandwidth / 1e12:.2f} TB/s {result['floor_s_per_step'] * 1e6:.0f} us per step, "
          f"{result['floor_s_per_epoch']:.3f} s per epoch of {a.examples} examples")


if __name__ == "__main__":
    main()

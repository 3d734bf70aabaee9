#!/usr/bin/env python3
"""The recall-latency curves of the ANN indexes' accuracy knob (ivf: cells scanned; hnsw:
efSearch) from a benchmarks/serve/ann result file: recall@100 against exact vs p50 latency of a
single query, one line per shape and index, the exact path's p50 as a dashed line.
usage: plot.py RESULT.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    result = json.load(open(sys.argv[1]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, shape in enumerate(result["shapes"]):
        color = f"C{i}"
        items = shape["args"]["items"]
        curves = shape.get("curves") or {"fp32": shape["curve"]}
        for j, (label, curve) in enumerate(curves.items()):
            xs = [c["p50_ms"] for c in curve]
            ys = [c["recall_at_100"] for c in curve]
            ax.plot(xs, ys, ["o-", "s--", "^:", "d-."][j % 4], color=color,
                    label=f"{shape['label']}: {items:,} items, {label}")
            for c in curve:
                ax.annotate(str(c["probe"]), (c["p50_ms"], c["recall_at_100"]), fontsize=7,
                            xytext=(3, -9), textcoords="offset points", color=color)
        for j, (label, peer) in enumerate(shape.get("peers", {}).items()):
            xs = [c["p50_ms"] for c in peer["curve"]]
            ys = [c["recall_at_100"] for c in peer["curve"]]
            ax.plot(xs, ys, ["x:", "+:"][j % 2], color=color, alpha=0.7,
                    label=f"{shape['label']}: {label} {peer['version']} (search only)")
        ax.axvline(shape["exact_in_process"]["p50_ms"], color=color, linestyle="--",
                   label=f"{shape['label']}: exact (fp16 screen) p50")
    ax.axhline(0.95, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("p50 latency of one query, ms (one core, in process; log scale)")
    ax.set_ylabel("recall@100 against exact")
    ax.set_title("ANN index: recall vs latency by cells scanned (ivf) or efSearch (hnsw)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()

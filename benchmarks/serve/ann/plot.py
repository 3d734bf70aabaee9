#!/usr/bin/env python3
"""The recall-latency curves of the ANN indexes' accuracy knob (ivf: cells scanned; hnsw:
efSearch) from a benchmarks/serve/ann result file: recall@100 against exact vs p50 latency of a
single query (recall on a scale of 1 - recall, so that 0.9, 0.99 and 0.999 lie evenly apart), one
panel per shape, one line per index: the project's whole query through the
Recommender (forward pass, search, exact re-ranking), and with --peers the search alone of the
project's ivf indexes beside faiss and hnswlib (peers.py); the exact path's p50 dashed.
usage: plot.py RESULT.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def miss(recall):
    """The y plotted: 1 - recall on a log scale (recall 0.9, 0.99, 0.999 evenly apart)."""
    return max(1.0 - recall, 1e-4)


def line(ax, curve, style, color, label):
    ax.plot([c["p50_ms"] for c in curve], [miss(c["recall_at_100"]) for c in curve], style,
            color=color, label=label, markersize=4)
    for c in curve:
        ax.annotate(str(c["probe"]), (c["p50_ms"], miss(c["recall_at_100"])), fontsize=6,
                    xytext=(3, -8), textcoords="offset points", color=color)


def main():
    result = json.load(open(sys.argv[1]))
    shapes = result["shapes"]
    fig, axes = plt.subplots(1, len(shapes), figsize=(6.5 * len(shapes), 6.2), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        n = 0

        def color():
            nonlocal n
            n += 1
            return f"C{n - 1}"

        curves = shape.get("curves") or {"fp32": shape["curve"]}
        for label, curve in curves.items():
            line(ax, curve, "o-", color(), f"sparsenet {label} (whole query)")
        alone = shape.get("search_alone", {})
        for label, index in alone.get("sparsenet", {}).items():
            line(ax, index["curve"], "s--", color(), f"sparsenet {label} (search only, C++)")
        if "faiss" in alone:
            line(ax, alone["faiss"]["curve"], "x:", color(),
                 f"faiss {alone['faiss']['version']} (Debian), IVFFlat IP (search only, C++)")
        for label, peer in shape.get("peers", {}).items():
            line(ax, peer["curve"], "+:", color(),
                 f"{label} {peer['version']} (PyPI; search only, from Python)")
        ax.axvline(shape["exact_in_process"]["p50_ms"], color="black", linestyle="--",
                   linewidth=0.8, label="exact (fp16 screen) p50")
        ax.axhline(miss(0.95), color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_yaxis()
        ticks = [0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999]
        ax.set_yticks([miss(r) for r in ticks])
        ax.set_yticklabels([str(r) for r in ticks])
        ax.minorticks_off()
        ax.set_xlabel("p50 latency of one query, ms (one core; log scale)")
        ax.set_ylabel("recall@100 against exact (scale of 1 - recall)")
        ax.set_title(f"{shape['label']}: {shape['args']['items']:,} items x "
                     f"{shape['args']['hidden']}", fontsize=10)
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        ax.grid(True, which="both", linewidth=0.3)
    fig.suptitle("ANN index: recall vs latency by cells scanned (ivf) or efSearch (hnsw)",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()

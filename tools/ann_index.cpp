// sparsenet ann-index: the ANN index of a model's output layer (approximate top-K for serving
// large catalogues; docs/serving.md, "ANN index"). Not a features index (convert -f).
#include <cstdio>
#include <string>

#include "args.h"
#include "common.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/error.h"

namespace sparsenet::cli {

int ann_index_main(int argc, char** argv) {
    return run_command("ann-index", [&]() {
        std::string model, out;
        AnnIndexOptions o;
        ArgParser args("ann-index",
                       "sparsenet ann-index -n MODEL.nc -o MODEL.ann [--kind KIND]: build the ANN "
                       "index of the model's output layer for `sparsenet serve --ann` and "
                       "RecommenderOptions::ann_index (approximate candidates, ranked exactly). "
                       "The file records the model it was built from; serving refuses it for "
                       "another.");
        args.add({"-n", "--model"}, &model, "MODEL", "the model file (netCDF) (required)");
        args.add({"-o", "--output"}, &out, "FILE", "the ANN index file to write (required)");
        args.add({"--kind"}, &o.kind, "KIND",
                 "ivf (default: k-means cells, the query scans the nearest), hnsw (a navigable "
                 "small-world graph) or flat (exhaustive: the exact answer, for tests and small "
                 "catalogues)");
        args.add({"--cells"}, &o.cells, "N",
                 "ivf: k-means cells (default: the power of 2 at or above 4 sqrt(items))");
        args.add({"--hnsw-m"}, &o.hnsw_m, "N", "hnsw: links per node (default 16)");
        args.add({"--ef-construction"}, &o.ef_construction, "N",
                 "hnsw: candidate list while building (default 80)");
        args.add({"--probe"}, &o.probe, "N",
                 "the default accuracy knob stored in the file: ivf's cells scanned per query "
                 "(default 1/32 of the cells, at least 8), hnsw's efSearch, the candidate list "
                 "of a search (default 128); serve --ann-probe overrides it");
        args.add({"--vectors"}, &o.vectors, "fp32|fp16|bf16",
                 "how the index stores the item vectors, which also re-rank the candidates "
                 "(default fp16: about half of fp32's memory, the same recall where the graph "
                 "is the same; biases stay fp32; scores are the output layer's over the rounded "
                 "weights)");
        args.add({"--threads"}, &o.threads, "N", "threads building (default: all)");
        args.add({"--layer"}, &o.output_layer, "NAME",
                 "the ranked layer (default: the first Output layer)");
        if (!args.parse(argc, argv)) return 0;
        if (model.empty()) {
            throw Error(ErrorCategory::kUsage, "-n MODEL is required (the model file to index)");
        }
        if (out.empty()) {
            throw Error(ErrorCategory::kUsage,
                        "-o FILE is required (where to write the ANN index, e.g. model.ann)");
        }
        if (o.threads < 0) {
            throw Error(ErrorCategory::kUsage,
                        "--threads " + std::to_string(o.threads) + ": expected 0 (all) or more");
        }
        const AnnIndexReport r = build_ann_index(model, out, o);
        std::printf(
            "ann-index: %s, %llu items x %u units, %s%s, %s vectors in %.2f s; %llu bytes (%.1f "
            "per item), fingerprint %016llx\n",
            out.c_str(), static_cast<unsigned long long>(r.items), r.width, r.kind.c_str(),
            r.kind == "hnsw"
                ? (" (M " + std::to_string(r.links) + ", efSearch " + std::to_string(r.probe) + ")")
                      .c_str()
            : r.kind == "ivf" ? (" (" + std::to_string(r.cells) + " cells, probe " +
                                 std::to_string(r.probe) + ")")
                                    .c_str()
                              : "",
            r.vectors.c_str(), r.seconds, static_cast<unsigned long long>(r.file_bytes),
            r.items ? double(r.file_bytes) / double(r.items) : 0.0,
            static_cast<unsigned long long>(r.fingerprint));
        return 0;
    });
}

}  // namespace sparsenet::cli

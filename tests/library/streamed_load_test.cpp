// The streamed load (NetworkOptions::load, LoadOptions): what it keeps is bit for bit what the
// whole load keeps after keep_bf16_input_weights and release_output_matrix (the BF16 input
// layer with its zero padding, the FP32 hidden layers, the output layer's fingerprint), across
// blocks of rows that cut the matrices anywhere; and a Recommender serving from an ANN index
// peaks, while loading, within 15 % of the memory it then holds (Linux: VmHWM, reset through
// /proc/self/clear_refs, against VmRSS).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/ann_index.h"
#include "engine/network_impl.h"
#include "engine/network_scoring.h"
#include "library/ann_test_util.h"
#include "library/library_test_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"

namespace sparsenet {
namespace {

using testing::recommender_config;
using testing::ann::save_network;
using StreamedLoad = testing::ann::Fixture;

// A config with two hidden layers: an FP32 matrix between them that both loads keep whole.
NetworkConfig deep_config(const std::string& output) {
    return NetworkConfig::from_json(R"({
      "Version": 0.9, "Name": "streamed", "Kind": "AutoEncoder", "ErrorFunction": "L2",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "H1", "Kind": "Hidden", "N": 13, "Activation": "Tanh"},
        {"Name": "Hidden", "Kind": "Hidden", "N": 9, "Activation": "Relu"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": ")" + output +
                                    R"("}]})");
}

template <class T>
std::vector<T> values(const DeviceArray<T>& a) {
    std::vector<T> v(a.size());
    if (!v.empty()) a.download(v.data(), v.size());
    return v;
}

TEST_F(StreamedLoad, KeepsBitForBitWhatTheWholeLoadKeeps) {
    for (const char* output : {"Sigmoid", "SoftMax"}) {
        SCOPED_TRACE(output);
        const uint32_t items = 203;  // rows of 203 floats, padded to 208
        const std::string model =
            save_network(deep_config(output), items, dir.file(std::string(output) + ".nc"));
        NetworkOptions o;
        o.device = "cpu";
        Network whole = Network::load(model, o);
        const int out = int(whole.impl().graph.layers.size()) - 1;
        const uint64_t fingerprint =
            engine::output_fingerprint(engine::dense_output_edge(whole, out));
        whole.keep_bf16_input_weights();
        engine::release_output_matrix(whole, out);
        for (size_t chunk : {size_t(1), size_t(7), size_t(1000), size_t(0)}) {
            SCOPED_TRACE("chunk_floats " + std::to_string(chunk));
            o.load.bf16_input_weights = true;
            o.load.release_output = true;
            o.load.chunk_floats = chunk;
            Network streamed = Network::load(model, o);
            const auto& a = whole.impl().params;
            const auto& b = streamed.impl().params;
            ASSERT_EQ(b.released_output, out);
            EXPECT_EQ(engine::output_fingerprint(engine::dense_output_edge(streamed, out)),
                      fingerprint);
            for (size_t wi = 0; wi < a.edges.size(); ++wi) {
                EXPECT_EQ(values(b.edges[wi].w), values(a.edges[wi].w)) << "edge " << wi;
                EXPECT_EQ(values(b.edges[wi].w_bf16), values(a.edges[wi].w_bf16)) << "edge " << wi;
            }
            EXPECT_FALSE(b.edges[0].w_bf16.size() == 0) << "the input layer's BF16 copy";
            EXPECT_EQ(b.edges.back().w.size(), 0u) << "the output matrix is never allocated";
            // What the network then holds is what the Recommender accounts: the input matrix's
            // FP32 less BF16 bytes, as keep_bf16_input_weights reports them.
            EXPECT_EQ(streamed.keep_bf16_input_weights(), size_t(items) * 16 * 2);
            // An inference network: a save is refused, naming why.
            try {
                streamed.save(dir.file("again.nc"));
                FAIL() << "expected the save of a streamed inference network to be refused";
            } catch (const Error& e) {
                EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
            }
        }
    }
}

std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// sparsenet ann-index (build_ann_index) reads the model streamed: no input layer, the output
// matrix straight into the item vectors (engine::ItemVectors). Its file is byte for byte the one
// built from the whole network, for every kind and precision of the vectors, whatever the blocks.
TEST_F(StreamedLoad, AnIndexFromTheStreamedLoadIsTheWholeLoadsByteForByte) {
    for (const char* output : {"Sigmoid", "SoftMax"}) {
        const uint32_t items = 700;
        const std::string model = save_network(recommender_config(output, 24), items,
                                               dir.file(std::string(output) + "-i.nc"));
        NetworkOptions o;
        o.device = "cpu";
        const Network whole = Network::load(model, o);
        const int out = int(whole.impl().graph.layers.size()) - 1;
        for (const char* kind : {"ivf", "flat", "hnsw"}) {
            for (const char* vectors : {"fp32", "fp16", "bf16"}) {
                SCOPED_TRACE(std::string(output) + " " + kind + " " + vectors);
                AnnIndexOptions b;
                b.kind = kind;
                b.vectors = vectors;
                b.threads = 1;  // hnsw's graph is the same for the same insertion order
                engine::AnnIndex::build(whole, out, model, b, dir.file("whole.ann"));
                const std::string want = file_bytes(dir.file("whole.ann"));
                ASSERT_FALSE(want.empty());
                build_ann_index(model, dir.file("streamed.ann"), b);
                ASSERT_TRUE(file_bytes(dir.file("streamed.ann")) == want);
                // The same load in blocks that cut the 24 rows anywhere (ann-index reads 512 MB
                // blocks, whole matrices here).
                for (size_t chunk : {size_t(items), size_t(5 * items + 3)}) {
                    const engine::AnnVectors v = engine::parse_ann_vectors(vectors);
                    engine::ItemVectors iv(items, 24, v, engine::ann_dims(24, v), model);
                    NetworkOptions so = o;
                    so.load.drop_input_weights = true;
                    so.load.release_output = true;
                    so.load.chunk_floats = chunk;
                    so.load.output_rows = [&](uint64_t first, uint64_t rows, uint64_t total,
                                              uint32_t cols, const float* values) {
                        EXPECT_EQ(total, 24u);
                        EXPECT_EQ(cols, items);
                        iv.add_rows(first, rows, values, cols);
                    };
                    const Network streamed = Network::load(model, so);
                    EXPECT_EQ(streamed.impl().params.edges[0].w.size(), 0u) << "input dropped";
                    ASSERT_EQ(iv.rows_seen(), 24u);
                    engine::AnnIndex::build(streamed, out, model, b, dir.file("blocks.ann"), &iv);
                    ASSERT_TRUE(file_bytes(dir.file("blocks.ann")) == want) << "chunk " << chunk;
                }
            }
        }
    }
}

// VmRSS or VmHWM of this process, bytes.
size_t status_bytes(const std::string& field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(field + ":", 0) == 0)
            return std::stoull(line.substr(field.size() + 1)) * 1024;
    }
    return 0;
}

// The child of the test below, in a process of its own (a fresh heap: memory the parent freed
// would otherwise be reused unseen): loads the Recommender and prints its memory. Skipped unless
// the parent set SPARSENET_TEST_STREAMED_MODEL.
TEST(StreamedLoadChild, LoadAndReport) {
    const char* model = std::getenv("SPARSENET_TEST_STREAMED_MODEL");
    if (model == nullptr) GTEST_SKIP() << "run by StreamedLoad.ARecommenderPeaks...";
    RecommenderOptions o = testing::ann::with_ann(std::string(model) + ".ann");
    o.bf16_input_weights = true;
    o.threads_per_call = 1;
    o.max_concurrent_calls = 1;
    const size_t before = status_bytes("VmRSS");
    { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM := VmRSS
    const Recommender r(model, o);
    const size_t peak = status_bytes("VmHWM"), held = status_bytes("VmRSS");
    ASSERT_FALSE(r.recommend(std::vector<ItemRef>{ItemRef(3), ItemRef(7)}, RecommendOptions{})
                     .items.empty());
    std::printf("memory: %zu %zu %zu\n", before, held, peak);
}

TEST_F(StreamedLoad, ARecommenderPeaksWithinFifteenPercentOfWhatItHolds) {
    {
        std::ofstream reset("/proc/self/clear_refs");
        if (!reset || !(reset << "5") || status_bytes("VmHWM") == 0)
            GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM to measure the peak with";
    }
    // 120,000 items x 48 units: 23 MB of FP32 per matrix; kept: the input layer in BF16 (11.5
    // MB) and the index's fp16 vectors (13 MB).
    const uint32_t items = 120000;
    const std::string model =
        save_network(recommender_config("Sigmoid", 48), items, dir.file("big.nc"));
    AnnIndexOptions build;
    build.cells = 64;
    build_ann_index(model, model + ".ann", build);
    const std::string out = dir.file("child.txt");
    char exe[4096] = {};
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT_GT(len, 0);
    const std::string cmd = "SPARSENET_TEST_STREAMED_MODEL='" + model + "' '" + std::string(exe) +
                            "' --gtest_filter=StreamedLoadChild.LoadAndReport > '" + out + "' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << testing::read_file(out);
    const std::string text = testing::read_file(out);
    const size_t at = text.find("memory: ");
    ASSERT_NE(at, std::string::npos) << text;
    size_t before = 0, held = 0, peak = 0;
    ASSERT_EQ(std::sscanf(text.c_str() + at, "memory: %zu %zu %zu", &before, &held, &peak), 3);
    ASSERT_GT(held, before);
    const double grown = double(held - before), peaked = double(peak - before);
    std::printf("before %.1f MB, held +%.1f MB, peak +%.1f MB: %.3fx\n", before / 1e6, grown / 1e6,
                peaked / 1e6, peaked / grown);
    // The whole load held both FP32 matrices (46 MB) beside the index before it freed them.
    EXPECT_LE(peaked, 1.15 * grown);
}

}  // namespace
}  // namespace sparsenet

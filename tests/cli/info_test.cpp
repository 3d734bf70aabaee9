// sparsenet info: the numbers it prints for datasets of every kind (computed here independently
// from how the test builds them) and for a model written by sparsenet train; bad files fail.
#include <gtest/gtest.h>
#include <json/json.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sparsenet/dataset.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::TempDir;

int run(const std::string& args, std::string* out) {
    return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, out);
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

Json::Value parse_json(const std::string& text) {
    Json::CharReaderBuilder builder;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    Json::Value value;
    std::string errors;
    EXPECT_TRUE(reader->parse(text.data(), text.data() + text.size(), &value, &errors))
        << errors << "\n"
        << text;
    return value;
}

// What info must report for one dataset, from the lengths of its examples.
struct Expected {
    std::string name, kind;
    uint64_t examples = 0, stored_rows = 0, columns = 0, nonzeros = 0, stored_nonzeros = 0;
    uint64_t empty = 0, min = 0, max = 0, median = 0, p90 = 0, p99 = 0;
    double mean = 0, density = 0;
};

// By counting, not sorting: the p-th percentile is the smallest length x such that at least p%
// of the examples have length <= x.
uint64_t percentile(const std::vector<uint64_t>& lengths, uint64_t p) {
    for (uint64_t x = 0;; ++x) {
        uint64_t at_most = 0;
        for (uint64_t len : lengths) at_most += len <= x;
        if (at_most * 100 >= p * lengths.size()) return x;
    }
}

Expected expect(const std::string& name, const std::string& kind,
                const std::vector<uint64_t>& lengths, uint64_t columns, uint64_t stored_rows,
                uint64_t stored_nonzeros) {
    Expected e;
    e.name = name;
    e.kind = kind;
    e.examples = lengths.size();
    e.stored_rows = stored_rows;
    e.columns = columns;
    e.stored_nonzeros = stored_nonzeros;
    e.min = lengths[0];
    for (uint64_t len : lengths) {
        e.nonzeros += len;
        e.empty += len == 0;
        e.min = std::min(e.min, len);
        e.max = std::max(e.max, len);
    }
    e.mean = double(e.nonzeros) / double(lengths.size());
    e.density = double(e.nonzeros) / (double(lengths.size()) * double(columns));
    e.median = percentile(lengths, 50);
    e.p90 = percentile(lengths, 90);
    e.p99 = percentile(lengths, 99);
    return e;
}

// Row r of `d` gets the columns of `row_columns(r)` (with values 1 + column / 2 when analog).
template <typename F>
Dataset build(const std::string& name, uint64_t rows, uint32_t cols, bool analog, F row_columns) {
    Dataset d;
    d.name = name;
    d.rows = rows;
    d.cols = cols;
    for (uint64_t r = 0; r < rows; ++r) {
        for (uint32_t c : row_columns(r)) {
            d.indices.push_back(c);
            if (analog) d.values.push_back(1.0f + 0.5f * float(c));
        }
        d.offsets.push_back(d.indices.size());
    }
    return d;
}

// Four datasets, one of each kind, and what info must say about them.
struct Fixture {
    std::vector<Dataset> datasets;
    std::vector<Expected> expected;

    Fixture() {
        // Sparse indicator: 200 rows over 100 columns, row r holds (r * 37) % 23 columns.
        auto clicks_length = [](uint64_t r) { return (r * 37) % 23; };
        datasets.push_back(build("clicks", 200, 100, false, [&](uint64_t r) {
            std::vector<uint32_t> cols;
            for (uint64_t k = 0; k < clicks_length(r); ++k) cols.push_back(uint32_t(4 * k + r % 4));
            return cols;
        }));
        std::vector<uint64_t> lengths;
        for (uint64_t r = 0; r < 200; ++r) lengths.push_back(clicks_length(r));
        expected.push_back(expect("clicks", "sparse indicator", lengths, 100, 200, 0));
        expected.back().stored_nonzeros = expected.back().nonzeros;

        // Sparse analog, weighted, SparseIgnoreZero: 30 rows over 12 columns, row r holds r % 5
        // columns.
        Dataset ratings = build("ratings", 30, 12, true, [](uint64_t r) {
            std::vector<uint32_t> cols;
            for (uint32_t k = 0; k < r % 5; ++k) cols.push_back(2 * k + 1);
            return cols;
        });
        for (uint64_t r = 0; r < 30; ++r) ratings.weights.push_back(0.1f * float(r));
        ratings.sparse_ignore_zero = true;
        datasets.push_back(ratings);
        lengths.clear();
        for (uint64_t r = 0; r < 30; ++r) lengths.push_back(r % 5);
        expected.push_back(
            expect("ratings", "sparse analog, weighted, ignore zero", lengths, 12, 30, 0));
        expected.back().stored_nonzeros = expected.back().nonzeros;

        // Dense analog, indexed: 5 stored rows of lengths 2 6 0 3 1 over 6 columns; 40 examples,
        // example e uses stored row (e * e) % 5.
        const std::vector<uint64_t> stored_lengths = {2, 6, 0, 3, 1};
        Dataset pixels = build("pixels", 5, 6, true, [&](uint64_t r) {
            std::vector<uint32_t> cols;
            for (uint32_t k = 0; k < stored_lengths[r]; ++k) cols.push_back(k);
            return cols;
        });
        pixels.dense = true;
        lengths.clear();
        for (uint32_t e = 0; e < 40; ++e) {
            pixels.example_rows.push_back((e * e) % 5);
            lengths.push_back(stored_lengths[(e * e) % 5]);
        }
        datasets.push_back(pixels);
        expected.push_back(expect("pixels", "dense, indexed", lengths, 6, 5, 2 + 6 + 0 + 3 + 1));

        // Dense categorical: 25 examples, one class of 4 each.
        Dataset label = build("label", 25, 4, false,
                              [](uint64_t r) { return std::vector<uint32_t>{uint32_t(r % 4)}; });
        label.dense = true;
        datasets.push_back(label);
        expected.push_back(
            expect("label", "dense categorical", std::vector<uint64_t>(25, 1), 4, 25, 25));
    }
};

std::string text_block(const Expected& e) {
    std::string examples = std::to_string(e.examples);
    std::string nonzeros = std::to_string(e.nonzeros);
    if (e.stored_rows != e.examples) {
        examples += " (" + std::to_string(e.stored_rows) + " unique stored rows)";
        nonzeros += " (" + std::to_string(e.stored_nonzeros) + " stored)";
    }
    char lengths[256], density[64];
    std::snprintf(lengths, sizeof lengths,
                  "empty %llu, min %llu, mean %.2f, median %llu, p90 %llu, p99 %llu, max %llu",
                  (unsigned long long)e.empty, (unsigned long long)e.min, e.mean,
                  (unsigned long long)e.median, (unsigned long long)e.p90,
                  (unsigned long long)e.p99, (unsigned long long)e.max);
    std::snprintf(density, sizeof density, "%.6g", e.density);
    return "dataset " + e.name + ": " + e.kind + "\n" + "  examples     " + examples + "\n" +
           "  columns      " + std::to_string(e.columns) + "\n" + "  nonzeros     " + nonzeros +
           "\n" + "  density      " + density + "\n" + "  row lengths  " + lengths + "\n";
}

TEST(InfoCli, DatasetFileText) {
    TempDir dir;
    const std::string path = dir.file("kinds.nc");
    const Fixture f;
    write_datasets(path, f.datasets);
    std::string out;
    ASSERT_EQ(run("info " + path, &out), 0) << out;
    EXPECT_TRUE(contains(out, path + ": 4 datasets\n")) << out;
    for (const Expected& e : f.expected) {
        EXPECT_TRUE(contains(out, text_block(e))) << "expected:\n"
                                                  << text_block(e) << "in:\n"
                                                  << out;
    }
    // Spot checks of the independent computation itself (lengths 0..22 of clicks, etc.).
    EXPECT_EQ(f.expected[0].max, 22u);
    EXPECT_GT(f.expected[0].empty, 0u);
    EXPECT_EQ(f.expected[2].examples, 40u);
}

TEST(InfoCli, DatasetFileJson) {
    TempDir dir;
    const std::string path = dir.file("kinds.nc");
    const Fixture f;
    write_datasets(path, f.datasets);
    std::string out;
    ASSERT_EQ(run("info --json " + path, &out), 0) << out;
    const Json::Value v = parse_json(out);
    ASSERT_EQ(v["files"].size(), 1u) << out;
    const Json::Value& file = v["files"][0];
    EXPECT_EQ(file["path"].asString(), path);
    EXPECT_EQ(file["type"].asString(), "datasets");
    ASSERT_EQ(file["datasets"].size(), f.expected.size());
    for (Json::ArrayIndex i = 0; i < file["datasets"].size(); ++i) {
        const Json::Value& d = file["datasets"][i];
        const Expected& e = f.expected[i];
        SCOPED_TRACE(e.name);
        EXPECT_EQ(d["name"].asString(), e.name);
        EXPECT_EQ(d["kind"].asString(), e.kind.substr(0, e.kind.find(',')));
        EXPECT_EQ(d["weighted"].asBool(), contains(e.kind, "weighted"));
        EXPECT_EQ(d["indexed"].asBool(), contains(e.kind, "indexed"));
        EXPECT_EQ(d["ignore_zero"].asBool(), contains(e.kind, "ignore zero"));
        EXPECT_EQ(d["examples"].asUInt64(), e.examples);
        EXPECT_EQ(d["stored_rows"].asUInt64(), e.stored_rows);
        EXPECT_EQ(d["columns"].asUInt64(), e.columns);
        EXPECT_EQ(d["nonzeros"].asUInt64(), e.nonzeros);
        EXPECT_EQ(d["stored_nonzeros"].asUInt64(), e.stored_nonzeros);
        EXPECT_NEAR(d["density"].asDouble(), e.density, 1e-12);
        const Json::Value& r = d["row_lengths"];
        EXPECT_EQ(r["empty"].asUInt64(), e.empty);
        EXPECT_EQ(r["min"].asUInt64(), e.min);
        EXPECT_NEAR(r["mean"].asDouble(), e.mean, 1e-12);
        EXPECT_EQ(r["median"].asUInt64(), e.median);
        EXPECT_EQ(r["p90"].asUInt64(), e.p90);
        EXPECT_EQ(r["p99"].asUInt64(), e.p99);
        EXPECT_EQ(r["max"].asUInt64(), e.max);
    }
}

const char* kConfig = R"({
  "Version": 0.9, "Name": "info-net", "ErrorFunction": "CrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true,
     "Normalize": {"Norm": "L2", "Scale": 2.5}},
    {"Name": "Hidden1", "Kind": "Hidden", "N": 12, "Activation": "Tanh"},
    {"Name": "Hidden2", "Kind": "Hidden", "N": 7, "Activation": "RectifiedLinear"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
     "Activation": "Sigmoid"}
  ]})";

TEST(InfoCli, ModelFile) {
    TempDir dir;
    const std::string data = dir.file("data.nc");
    const std::string config = dir.file("net.json");
    const std::string model = dir.file("model.nc");
    testing::write_file(config, kConfig);
    std::string out;
    ASSERT_EQ(run("generate -o " + data + " --users 60 --items 25 --nnz 400 -q", &out), 0) << out;
    ASSERT_EQ(run("train -c " + config + " -i " + data + " -n " + model + " -e 1 -b 16 -q", &out),
              0)
        << out;

    // 25 -> 12 -> 7 -> 25, biases on the three non-input layers.
    const uint64_t weights = 25 * 12 + 12 * 7 + 7 * 25;
    const uint64_t biases = 12 + 7 + 25;
    ASSERT_EQ(run("info " + model, &out), 0) << out;
    EXPECT_TRUE(contains(out, model + ": sparsenet model 'info-net' (FeedForward), loss "
                                      "CrossEntropy\n"))
        << out;
    EXPECT_TRUE(contains(out, "  Input    Input   N 25")) << out;
    EXPECT_TRUE(contains(out, "dataset gl_input (sparse), rows L2-normalised to 2.5\n")) << out;
    EXPECT_TRUE(contains(out, "  Hidden1  Hidden  N 12        Tanh\n")) << out;
    EXPECT_TRUE(contains(out, "  Hidden2  Hidden  N 7         RectifiedLinear\n")) << out;
    EXPECT_TRUE(
        contains(out, "  Output   Output  N 25        Sigmoid          dataset gl_output\n"))
        << out;
    EXPECT_TRUE(contains(out, "Input -> Hidden1    25 x 12\n")) << out;
    EXPECT_TRUE(contains(out, "Hidden1 -> Hidden2  12 x 7\n")) << out;
    EXPECT_TRUE(contains(out, "Hidden2 -> Output   7 x 25\n")) << out;
    EXPECT_TRUE(contains(out, "parameters " + std::to_string(weights + biases) + " (weights " +
                                  std::to_string(weights) + ", biases " + std::to_string(biases) +
                                  ")\n"))
        << out;

    // One JSON object for a model and a dataset file together.
    ASSERT_EQ(run("info --json " + model + " " + data, &out), 0) << out;
    const Json::Value v = parse_json(out);
    ASSERT_EQ(v["files"].size(), 2u) << out;
    const Json::Value& m = v["files"][0]["model"];
    EXPECT_EQ(v["files"][0]["type"].asString(), "model");
    EXPECT_EQ(m["loss"].asString(), "CrossEntropy");
    EXPECT_EQ(m["parameters"].asUInt64(), weights + biases);
    ASSERT_EQ(m["layers"].size(), 4u);
    const char* names[] = {"Input", "Hidden1", "Hidden2", "Output"};
    const uint64_t sizes[] = {25, 12, 7, 25};
    const char* activations[] = {"", "Tanh", "RectifiedLinear", "Sigmoid"};
    for (Json::ArrayIndex i = 0; i < 4; ++i) {
        EXPECT_EQ(m["layers"][i]["name"].asString(), names[i]);
        EXPECT_EQ(m["layers"][i]["n"].asUInt64(), sizes[i]);
        EXPECT_EQ(m["layers"][i]["activation"].asString(), activations[i]);
    }
    EXPECT_EQ(m["layers"][0]["dataset"].asString(), "gl_input");
    EXPECT_EQ(m["layers"][0]["normalize_l2"].asDouble(), 2.5);
    EXPECT_FALSE(m["layers"][3].isMember("normalize_l2"));
    EXPECT_EQ(m["layers"][3]["dataset"].asString(), "gl_output");
    ASSERT_EQ(m["weights"].size(), 3u);
    EXPECT_EQ(m["weights"][1]["from"].asString(), "Hidden1");
    EXPECT_EQ(m["weights"][1]["to"].asString(), "Hidden2");
    EXPECT_EQ(m["weights"][1]["rows"].asUInt64(), 12u);
    EXPECT_EQ(m["weights"][1]["cols"].asUInt64(), 7u);
    const Json::Value& d = v["files"][1];
    EXPECT_EQ(d["type"].asString(), "datasets");
    ASSERT_EQ(d["datasets"].size(), 2u);
    const Dataset input = Dataset::read(data, "gl_input");
    EXPECT_EQ(d["datasets"][0]["examples"].asUInt64(), 60u);
    EXPECT_EQ(d["datasets"][0]["nonzeros"].asUInt64(), input.nnz());
}

// A tied autoencoder trained by the CLI: the decoder edge is listed as sharing the encoder's
// matrix, which is counted once.
TEST(InfoCli, TiedModelCountsTheSharedMatrixOnce) {
    TempDir dir;
    const std::string data = dir.file("data.nc");
    const std::string config = dir.file("net.json");
    const std::string model = dir.file("model.nc");
    testing::write_file(config, R"({
      "Name": "tied", "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 12},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
         "SharedWeights": {"InputLayer": "Hidden", "SourceInputLayer": "Input",
                           "SourceOutputLayer": "Hidden", "Transposed": true}}
      ]})");
    std::string out;
    ASSERT_EQ(run("generate -o " + data + " --users 60 --items 25 --nnz 400 -q", &out), 0) << out;
    ASSERT_EQ(run("train -c " + config + " -i " + data + " -n " + model + " -e 1 -b 16 -q", &out),
              0)
        << out;
    const uint64_t weights = 25 * 12, biases = 12 + 25;
    ASSERT_EQ(run("info " + model, &out), 0) << out;
    EXPECT_TRUE(contains(out, "Input -> Hidden   25 x 12\n")) << out;
    EXPECT_TRUE(contains(out, "Hidden -> Output  12 x 25  shares Input -> Hidden (transposed)\n"))
        << out;
    EXPECT_TRUE(contains(out, "parameters " + std::to_string(weights + biases) + " (weights " +
                                  std::to_string(weights) + ", biases " + std::to_string(biases) +
                                  ")\n"))
        << out;
    ASSERT_EQ(run("info --json " + model, &out), 0) << out;
    const Json::Value m = parse_json(out)["files"][0]["model"];
    EXPECT_EQ(m["parameters"].asUInt64(), weights + biases);
    ASSERT_EQ(m["weights"].size(), 2u);
    EXPECT_FALSE(m["weights"][0].isMember("shares"));
    EXPECT_EQ(m["weights"][1]["shares"]["from"].asString(), "Input");
    EXPECT_EQ(m["weights"][1]["shares"]["to"].asString(), "Hidden");
    EXPECT_TRUE(m["weights"][1]["shares"]["transposed"].asBool());

    // The model predicts and evaluates, with the output layer named or not.
    // --device cpu: `auto` says on stderr which backend it took, a line that this count of the
    // recommendation lines (stdout and stderr together) would include.
    ASSERT_EQ(
        run("predict -n " + model + " --input " + data + " -k 3 --output-layer Output --device cpu",
            &out),
        0)
        << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 60) << out;
    std::string named;
    ASSERT_EQ(run("evaluate -n " + model + " --input " + data + " --heldout " + data +
                      " -k 5 --output-layer Output",
                  &named),
              0)
        << named;
    ASSERT_EQ(
        run("evaluate -n " + model + " --input " + data + " --heldout " + data + " -k 5", &out), 0)
        << out;
    EXPECT_EQ(named, out);
    EXPECT_NE(run("evaluate -n " + model + " --input " + data + " --heldout " + data +
                      " --output-layer Nope",
                  &out),
              0);
    EXPECT_TRUE(contains(out, "no layer 'Nope'")) << out;
}

TEST(InfoCli, BadFilesFailWithTheirPath) {
    TempDir dir;
    std::string out;
    const std::string missing = dir.file("missing.nc");
    EXPECT_EQ(run("info " + missing, &out), 1) << out;
    EXPECT_TRUE(contains(out, missing + ": cannot open: No such file or directory")) << out;

    const std::string text = dir.file("text.nc");
    testing::write_file(text, "user1\t3,1:4,1\n");
    EXPECT_EQ(run("info --json " + text, &out), 1) << out;
    EXPECT_TRUE(contains(out, text + ": cannot open (not a netCDF file")) << out;

    const std::string good = dir.file("good.nc");
    const std::string truncated = dir.file("truncated.nc");
    write_datasets(
        good, {testing::random_dataset(3000, 500, testing::RowShape::kPowerLaw, true, 3, "big")});
    const std::string bytes = testing::read_file(good);
    testing::write_file(truncated, bytes.substr(0, bytes.size() / 2));
    EXPECT_EQ(run("info " + good + " " + truncated, &out), 1) << out;
    EXPECT_TRUE(contains(out, "sparsenet info: error: " + truncated)) << out;
    EXPECT_TRUE(contains(out, "truncated or corrupt")) << out;

    EXPECT_EQ(run("info", &out), 2) << out;
    EXPECT_TRUE(contains(out, "no file given")) << out;
    EXPECT_EQ(run("info --bogus " + good, &out), 2) << out;
    EXPECT_TRUE(contains(out, "unknown option '--bogus'")) << out;
}

}  // namespace
}  // namespace sparsenet

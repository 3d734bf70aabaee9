#include "support/test_support.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sparsenet/config.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "test_configs.h"  // generated from tests/data/configs (tests/CMakeLists.txt)

namespace sparsenet::testing {

TempDir::TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sparsenet-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

Dataset random_dataset(uint64_t rows, uint32_t cols, RowShape shape, bool with_values,
                       uint64_t seed, const std::string& name) {
    std::mt19937_64 rng(seed);
    Dataset d;
    d.name = name;
    d.rows = rows;
    d.cols = cols;
    d.offsets.assign(1, 0);
    for (uint64_t r = 0; r < rows; ++r) {
        uint64_t len = 0;
        switch (shape) {
            case RowShape::kEmptyRows:
                len = (r % 3 == 0) ? 0 : 1 + rng() % std::min<uint32_t>(cols, 8);
                break;
            case RowShape::kOneNonzero:
                len = cols > 0 ? 1 : 0;
                break;
            case RowShape::kPowerLaw: {
                // Pareto-like lengths: most rows short, a few very long.
                const double u = (rng() >> 11) * (1.0 / 9007199254740992.0);
                len = static_cast<uint64_t>(1.0 / std::max(1e-3, u * u));
                break;
            }
            case RowShape::kUniform:
                len = 1 + rng() % std::max<uint32_t>(1, cols / 4);
                break;
        }
        len = std::min<uint64_t>(len, cols);
        std::set<uint32_t> picked;
        while (picked.size() < len) picked.insert(static_cast<uint32_t>(rng() % cols));
        for (uint32_t c : picked) {
            d.indices.push_back(c);
            if (with_values) d.values.push_back(0.25f + static_cast<float>(rng() % 1000) / 500.0f);
        }
        d.offsets.push_back(d.indices.size());
    }
    return d;
}

std::string expect_error(const std::function<void()>& f, ErrorCategory category) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), category) << to_string(e.category()) << ": " << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected an Error of category " << to_string(category);
    return "";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

void expect_same_dataset(const Dataset& a, const Dataset& b, const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.cols, b.cols);
    EXPECT_EQ(a.offsets, b.offsets);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
    EXPECT_EQ(a.weights, b.weights);
    EXPECT_EQ(a.example_rows, b.example_rows);
    EXPECT_EQ(a.dense, b.dense);
    EXPECT_EQ(a.sparse_ignore_zero, b.sparse_ignore_zero);
}

std::string sparse_autoencoder_json(uint32_t hidden) {
    NetworkConfig config =
        NetworkConfig::from_json(kSparseAutoencoderJson, "sparse_autoencoder.json");
    for (LayerConfig& layer : config.layers) {
        if (layer.kind == LayerKind::kHidden) layer.n = hidden;
    }
    return config.to_json();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

int run_command(const std::string& command, std::string* output) {
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return -1;
    std::string text;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
    const int status = pclose(pipe);
    if (output != nullptr) *output = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int check_gradients_numerically(Network& net, Trainer& trainer, uint64_t first_row, uint32_t count,
                                float h, double* largest, const std::set<std::string>& untrained) {
    const auto grads = trainer.compute_gradients(first_row, count);
    int checked = 0;
    double biggest = 0.0;
    for (const Parameter& p : net.parameters()) {
        if (untrained.count(p.name) > 0) {
            EXPECT_EQ(grads.count(p.name), 0u) << p.name << " is not trained: no gradient";
            continue;
        }
        std::vector<float> values = net.get_parameter(p.name);
        const std::vector<float>& g = grads.at(p.name);
        EXPECT_EQ(g.size(), values.size()) << p.name;
        if (g.size() != values.size()) continue;
        for (size_t i = 0; i < values.size(); ++i) {
            const float saved = values[i];
            values[i] = saved + h;
            net.set_parameter(p.name, values);
            const double plus = trainer.compute_loss(first_row, count);
            values[i] = saved - h;
            net.set_parameter(p.name, values);
            const double minus = trainer.compute_loss(first_row, count);
            values[i] = saved;
            net.set_parameter(p.name, values);
            const double numeric = (plus - minus) / (2.0 * h);
            const double analytic = g[i];
            EXPECT_NEAR(analytic, numeric,
                        2e-3 + 2e-2 * std::max(std::abs(numeric), std::abs(analytic)))
                << p.name << "[" << i << "]";
            biggest = std::max(biggest, std::abs(numeric));
            ++checked;
        }
    }
    if (largest != nullptr) *largest = biggest;
    return checked;
}

}  // namespace sparsenet::testing

// The layering rules of docs/architecture.md, checked on the source tree: the CLI is a client of
// the public API (tools/ includes include/sparsenet/ and its own headers only; CMake also keeps
// src/ off its include path), the kernels depend on nothing in src/ (the backends include the
// kernels' headers, never the reverse), and no source file grows past 1,500 lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace sparsenet {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = SPARSENET_SOURCE_DIR;

bool is_source(const fs::path& p) {
    const std::string e = p.extension().string();
    return e == ".h" || e == ".cpp" || e == ".cu" || e == ".cuh";
}

// The project's sources under `dir`. Hidden folders are not the project's: `make bench` puts a
// Python environment in benchmarks/.venv, whose numpy and triton headers broke the line limit.
std::vector<fs::path> sources_under(const fs::path& dir) {
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
         ++it) {
        if (it->is_directory() && it->path().filename().string().rfind('.', 0) == 0) {
            it.disable_recursion_pending();
            continue;
        }
        if (it->is_regular_file() && is_source(it->path())) files.push_back(it->path());
    }
    return files;
}

struct Include {
    int line;
    std::string path;  // as written between the quotes
};

// The quoted includes of a file (angle-bracket ones are system and third-party headers).
std::vector<Include> quoted_includes(const fs::path& file) {
    static const std::regex include(R"(^\s*#\s*include\s*"([^"]+)\")");
    std::ifstream in(file);
    std::vector<Include> found;
    std::string text;
    for (int line = 1; std::getline(in, text); ++line) {
        std::smatch m;
        if (std::regex_search(text, m, include)) found.push_back({line, m[1].str()});
    }
    return found;
}

std::string where(const fs::path& file, const Include& inc) {
    return fs::relative(file, kSource).string() + ":" + std::to_string(inc.line) + ": \"" +
           inc.path + "\"";
}

TEST(Layering, ToolsIncludeOnlyThePublicApiAndTheirOwnHeaders) {
    const std::vector<fs::path> files = sources_under(kSource / "tools");
    ASSERT_GE(files.size(), 10u);
    for (const fs::path& f : files) {
        for (const Include& inc : quoted_includes(f)) {
            const bool own = fs::exists(kSource / "tools" / inc.path);
            const bool public_api = fs::exists(kSource / "include" / inc.path);
            EXPECT_TRUE(own || public_api)
                << where(f, inc) << " is neither a public header (include/) nor one of tools/";
        }
    }
}

TEST(Layering, KernelsIncludeNothingFromSrc) {
    const std::vector<fs::path> files = sources_under(kSource / "kernels");
    ASSERT_GE(files.size(), 10u);
    for (const fs::path& f : files) {
        for (const Include& inc : quoted_includes(f)) {
            const bool in_kernels = fs::exists(f.parent_path() / inc.path) ||
                                    fs::exists(kSource / "kernels" / inc.path);
            const bool public_api = fs::exists(kSource / "include" / inc.path);
            EXPECT_TRUE(in_kernels || public_api)
                << where(f, inc) << " is not in kernels/ or include/ (kernels never include src/)";
            EXPECT_FALSE(fs::exists(kSource / "src" / inc.path)) << where(f, inc) << " is in src/";
        }
    }
}

// The network's private header (src/engine/network_impl.h) is the network's own: only its
// network*.cpp files include it, and the headers of its four parts (network_graph.h,
// network_plan.h, network_parameters.h, network_buffers.h) only it and they. The Trainer, the
// Predictor, the Recommender and the output screen ask narrow parts of it instead
// (network_training.h, network_scoring.h, network_bindings.h).
TEST(Layering, OnlyTheNetworkIncludesItsPrivateHeader) {
    const std::set<std::string> parts = {"engine/network_graph.h", "engine/network_plan.h",
                                         "engine/network_parameters.h", "engine/network_buffers.h"};
    for (const std::string& p : parts) EXPECT_TRUE(fs::exists(kSource / "src" / p)) << p;
    size_t network_files = 0;
    for (const char* dir : {"src", "tools", "include", "kernels"}) {
        for (const fs::path& f : sources_under(kSource / dir)) {
            const std::string rel = fs::relative(f, kSource).string();
            const bool own = rel.rfind("src/engine/network", 0) == 0;
            const bool private_header = rel == "src/engine/network_impl.h";
            for (const Include& inc : quoted_includes(f)) {
                if (parts.count(inc.path) > 0) {
                    if (private_header || (own && parts.count(rel.substr(4)) > 0)) continue;
                    ADD_FAILURE() << where(f, inc) << ": only network_impl.h includes the headers "
                                  << "of the network's parts";
                    continue;
                }
                if (inc.path != "engine/network_impl.h") continue;
                if (own) {
                    ++network_files;
                    continue;
                }
                ADD_FAILURE() << where(f, inc) << ": only src/engine/network*.cpp include the "
                              << "network's private header";
            }
        }
    }
    EXPECT_GE(network_files, 3u);  // network.cpp, network_passes.cpp, network_training.cpp, ...
}

TEST(Layering, NoSourceFileIsOver1500Lines) {
    size_t checked = 0;
    for (const char* dir :
         {"src", "include", "kernels", "tools", "tests", "benchmarks", "python"}) {
        if (!fs::exists(kSource / dir)) continue;
        for (const fs::path& f : sources_under(kSource / dir)) {
            std::ifstream in(f);
            size_t lines = 0;
            for (std::string text; std::getline(in, text);) ++lines;
            EXPECT_LE(lines, 1500u) << fs::relative(f, kSource).string();
            ++checked;
        }
    }
    EXPECT_GE(checked, 100u);
}

// The include scanner itself: it sees a quoted include and skips angle-bracket ones.
TEST(Layering, TheScannerFindsQuotedIncludes) {
    testing::TempDir dir;
    testing::write_file(dir.file("a.cpp"),
                        "#include <vector>\n  #  include \"comm/communicator.h\"\nint x;\n");
    const std::vector<Include> found = quoted_includes(dir.file("a.cpp"));
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].line, 2);
    EXPECT_EQ(found[0].path, "comm/communicator.h");
}

}  // namespace
}  // namespace sparsenet

// The installed package: `cmake --install` of this build into a temporary prefix, moved
// elsewhere (relocatable), then docs/examples/serve built against it by a separate CMake project
// with find_package(sparsenet) (shared, and COMPONENTS static) and by pkg-config; the example
// answers JSON queries exactly as the Recommender does in this process.
#include <gtest/gtest.h>
#include <json/json.h>

#include <filesystem>
#include <sstream>

#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kItems = 40;

std::string q(const std::string& s) {
    return "'" + s + "'";
}

// Runs a shell command; on failure the test fails with its output.
void sh(const std::string& command) {
    std::string out;
    const int status = testing::run_command(command, &out);
    ASSERT_EQ(status, 0) << command << "\n" << out;
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) out.push_back(line);
    return out;
}

struct Case {
    std::string json;  // one line of input to the example
    Query query;       // the same query for the in-process Recommender
    bool error = false;
};

std::vector<Case> cases(const std::vector<std::string>& names) {
    std::vector<Case> c;
    auto add = [&](std::string json, std::vector<ItemRef> items, RecommendOptions o,
                   bool error = false) {
        c.push_back({std::move(json), Query{std::move(items), std::move(o)}, error});
    };
    RecommendOptions k5;
    k5.k = 5;
    add(R"({"items": ["item-5", "item-9", "say \"hi\""], "k": 5})", {"item-5", "item-9", names[1]},
        k5);
    RecommendOptions deny;
    deny.k = 8;
    deny.deny = {4, "item-6"};
    add(R"({"items": [3, [17, 2.5], "caf\u00e9 back\\slash"], "k": 8, "deny": [4, "item-6"]})",
        {3, {17, 2.5f}, names[2]}, deny);
    RecommendOptions allow;
    allow.k = 3;
    allow.allow = {1, 2, 3, names[3], 20};
    add(R"({"items": [10, 11], "allow": [1, 2, 3, "x\/y {1}", 20], "k": 3})", {10, 11}, allow);
    RecommendOptions include;
    include.k = 4;
    include.exclude_inputs = false;
    add(R"({"items": [10], "exclude_inputs": false, "k": 4})", {10}, include);
    RecommendOptions ignore;
    ignore.ignore_unknown = true;
    add(R"({"items": ["ghost", 7, 999], "ignore_unknown": true})", {"ghost", 7, 999}, ignore);
    add(R"({"items": ["ghost"]})", {"ghost"}, {}, true);
    add(R"({"items": []})", {}, {});
    add(R"({"items": [1,)", {}, {}, true);
    RecommendOptions k0;
    k0.k = 0;
    add(R"({"items": [1], "k": 0})", {1}, k0, true);
    return c;
}

// Checks the example's answers, line by line, against the in-process Recommender.
void expect_answers(const std::string& output, const std::vector<Case>& cs, const Recommender& r) {
    const std::vector<std::string> got = lines(output);
    ASSERT_EQ(got.size(), cs.size()) << output;
    for (size_t i = 0; i < cs.size(); ++i) {
        SCOPED_TRACE("query " + std::to_string(i) + ": " + cs[i].json + "\nanswer: " + got[i]);
        Json::Value answer;
        Json::CharReaderBuilder builder;
        std::string errors;
        std::istringstream in(got[i]);
        ASSERT_TRUE(Json::parseFromStream(builder, in, &answer, &errors)) << errors;
        if (cs[i].error) {
            EXPECT_TRUE(answer.isMember("error"));
            EXPECT_FALSE(answer.isMember("items"));
            continue;
        }
        ASSERT_FALSE(answer.isMember("error")) << answer["error"].asString();
        const Recommendations want = r.recommend(cs[i].query.items, cs[i].query.options);
        const Json::Value& items = answer["items"];
        ASSERT_EQ(items.size(), want.items.size());
        for (Json::ArrayIndex j = 0; j < items.size(); ++j) {
            EXPECT_EQ(items[j]["name"].asString(), want.items[j].name);
            EXPECT_EQ(items[j]["id"].asUInt(), want.items[j].id);
            // %.9g round-trips a float exactly.
            EXPECT_EQ(static_cast<float>(items[j]["score"].asDouble()), want.items[j].score);
        }
        std::vector<std::string> unknown;
        for (const Json::Value& u : answer["unknown"]) unknown.push_back(u.asString());
        EXPECT_EQ(unknown, want.unknown);
    }
}

TEST(Install, ExampleServiceBuiltAgainstTheInstalledPackageAnswersLikeTheLibrary) {
    testing::TempDir dir;
    const std::string stage = dir.file("stage"), prefix = dir.file("moved");
    sh(q(SPARSENET_CMAKE_COMMAND) + " --install " + q(SPARSENET_BINARY_DIR) + " --prefix " +
       q(stage));
    fs::rename(stage, prefix);  // relocatable: nothing may point into the staging prefix

    // What was installed.
    const std::string source_include = std::string(SPARSENET_SOURCE_DIR) + "/include";
    EXPECT_EQ(testing::public_headers(prefix + "/include"),
              testing::public_headers(source_include));
    std::string libdir;
    for (const char* d : {"lib", "lib64"}) {
        if (fs::exists(prefix + "/" + d + "/cmake/sparsenet/sparsenetConfig.cmake"))
            libdir = prefix + "/" + d;
    }
    ASSERT_NE(libdir, "") << "no sparsenetConfig.cmake under " << prefix;
    for (const char* f :
         {"libsparsenet.so", "libsparsenet.a", "pkgconfig/sparsenet.pc",
          "pkgconfig/sparsenet-static.pc", "cmake/sparsenet/sparsenetConfigVersion.cmake",
          "cmake/sparsenet/sparsenetTargets.cmake",
          "cmake/sparsenet/sparsenetStaticTargets.cmake"}) {
        EXPECT_TRUE(fs::exists(libdir + "/" + f)) << f;
    }
    EXPECT_TRUE(fs::exists(prefix + "/bin/sparsenet"));
    std::string out;
    sh("grep -rl " + q(stage) + " " + q(prefix) + " > " + q(dir.file("grep.txt")) + " || true");
    EXPECT_EQ(testing::read_file(dir.file("grep.txt")), "") << "files naming the staging prefix";
    // The installed headers compile alone too, with only the installed include directory.
    for (const std::string& h : testing::public_headers(prefix + "/include")) {
        EXPECT_EQ(
            testing::check_header_alone(SPARSENET_CXX_COMPILER, prefix + "/include", h, dir.path()),
            "");
    }

    // A model trained here, and its features index (labels JSON must escape included).
    const std::string model = dir.file("model.nc"), index = dir.file("features.index");
    testing::trained_network(kItems, 16, 300, 2).save(model);
    const std::vector<std::string> names = testing::item_names(kItems);
    write_index(index, names);
    const std::vector<Case> cs = cases(names);
    std::string input;
    for (const Case& c : cs) input += c.json + "\n";
    testing::write_file(dir.file("queries.jsonl"), input);
    RecommenderOptions options;
    options.features_index = index;
    const Recommender recommender(model, options);

    // Built by CMake against the moved prefix: the shared library, then the static one.
    const std::string example = std::string(SPARSENET_SOURCE_DIR) + "/docs/examples/serve";
    auto cmake_build = [&](const std::string& build, const std::string& extra) {
        sh(q(SPARSENET_CMAKE_COMMAND) + " -S " + q(example) + " -B " + q(build) + " -G " +
           q(SPARSENET_CMAKE_GENERATOR) + " -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" +
           q(SPARSENET_CXX_COMPILER) + " -DCMAKE_PREFIX_PATH=" + q(prefix) + " " + extra);
        sh(q(SPARSENET_CMAKE_COMMAND) + " --build " + q(build));
    };
    auto serve = [&](const std::string& binary) {
        const std::string answers = dir.file("answers.jsonl");
        sh(q(binary) + " " + q(model) + " " + q(index) + " < " + q(dir.file("queries.jsonl")) +
           " > " + q(answers));
        return testing::read_file(answers);
    };
    auto cmake_build_project = [&](const std::string& source, const std::string& build) {
        sh(q(SPARSENET_CMAKE_COMMAND) + " -S " + q(source) + " -B " + q(build) + " -G " +
           q(SPARSENET_CMAKE_GENERATOR) + " -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" +
           q(SPARSENET_CXX_COMPILER) + " -DCMAKE_PREFIX_PATH=" + q(prefix));
        sh(q(SPARSENET_CMAKE_COMMAND) + " --build " + q(build));
    };
    cmake_build(dir.file("build-shared"), "");
    if (HasFatalFailure()) return;
    const std::string shared_answers = serve(dir.file("build-shared/serve"));
    expect_answers(shared_answers, cs, recommender);
    cmake_build(dir.file("build-static"), "-DSERVE_STATIC=ON");
    if (HasFatalFailure()) return;

    // Built by pkg-config, when it is installed.
    const bool have_pkg_config = testing::run_command("pkg-config --version", &out) == 0;
    const std::string pc = "PKG_CONFIG_PATH=" + q(libdir + "/pkgconfig") + " pkg-config";
    if (have_pkg_config) {
        sh(q(SPARSENET_CXX_COMPILER) + " -std=c++17 -O1 " + q(example + "/main.cpp") + " -o " +
           q(dir.file("serve-pc")) + " $(" + pc +
           " --cflags --libs sparsenet jsoncpp) -Wl,-rpath," + q(libdir));
        sh(q(SPARSENET_CXX_COMPILER) + " -std=c++17 -O1 " + q(example + "/main.cpp") + " -o " +
           q(dir.file("serve-pc-static")) + " $(" + pc +
           " --cflags --libs sparsenet-static jsoncpp)");
        if (HasFatalFailure()) return;
        EXPECT_EQ(serve(dir.file("serve-pc")), shared_answers);
    }

    // Issue 23: a separate CMake project that includes only <sparsenet/sparsenet.h> loads a
    // model by path (the feature names inside it, no index file) and answers
    // recommend({"50", "100"}, 10) from several threads, as this process does.
    const std::string named_model = dir.file("named.nc");
    {
        Network net = testing::trained_network(120, 16, 300, 2);
        std::vector<std::string> movie_ids;  // column c is movie c + 1, as MovieLens ids
        for (uint32_t c = 0; c < 120; ++c) movie_ids.push_back(std::to_string(c + 1));
        for (const LayerConfig& l : net.config().layers) {
            if (l.kind != LayerKind::kHidden) net.set_feature_names(l.name, movie_ids);
        }
        net.save(named_model);
    }
    const std::string one_header = dir.file("one-header");
    fs::create_directories(one_header);
    testing::write_file(
        one_header + "/CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\n"
        "project(one_header CXX)\n"
        "find_package(sparsenet REQUIRED)\n"
        "find_package(Threads REQUIRED)\n"
        "add_executable(one_header main.cpp)\n"
        "target_link_libraries(one_header sparsenet::sparsenet Threads::Threads)\n");
    testing::write_file(one_header + "/main.cpp", R"(#include <sparsenet/sparsenet.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    const sparsenet::Recommender recommender(argv[1]);
    std::vector<std::string> answers(4);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < answers.size(); ++t) {
        threads.emplace_back([&, t] {
            for (int repeat = 0; repeat < 50; ++repeat) {
                std::string text;
                for (const auto& r : recommender.recommend({"50", "100"}, 10).items) {
                    char line[96];
                    std::snprintf(line, sizeof line, "%s %u %.9g\n", r.name.c_str(), r.id, r.score);
                    text += line;
                }
                if (repeat > 0 && text != answers[t]) answers[t] = "differs between calls";
                if (repeat == 0) answers[t] = text;
            }
        });
    }
    for (auto& t : threads) t.join();
    for (const auto& a : answers) {
        if (a != answers[0]) return std::puts("threads disagree"), 1;
    }
    std::fputs(answers[0].c_str(), stdout);
    return argc > 2 ? 1 : 0;
}
)");
    cmake_build_project(one_header, dir.file("build-one-header"));
    if (HasFatalFailure()) return;
    {
        const std::string answers = dir.file("one-header.txt");
        sh(q(dir.file("build-one-header/one_header")) + " " + q(named_model) + " > " + q(answers));
        const Recommender named(named_model);
        const Recommendations want = named.recommend({"50", "100"}, 10);
        ASSERT_EQ(want.items.size(), 10u);
        std::string expected;
        for (const Recommendation& r : want.items) {
            EXPECT_NE(r.name, "50");
            EXPECT_NE(r.name, "100");
            EXPECT_EQ(r.name, std::to_string(r.id + 1));
            char line[96];
            std::snprintf(line, sizeof line, "%s %u %.9g\n", r.name.c_str(), r.id, r.score);
            expected += line;
        }
        EXPECT_EQ(testing::read_file(answers), expected);
    }

    // The static builds need nothing of the package at run time.
    fs::rename(prefix, dir.file("gone"));
    EXPECT_EQ(serve(dir.file("build-static/serve")), shared_answers);
    if (have_pkg_config) {
        EXPECT_EQ(serve(dir.file("serve-pc-static")), shared_answers);
    }
}

}  // namespace
}  // namespace sparsenet

// `sparsenet ann-index` and `sparsenet serve --ann` from the outside: bad input gets a clear error
// and a non-zero exit; a server answering from an exhaustive (flat) ANN index answers exactly
// what the in-process Recommender answers without one, filters included, and counts its index
// queries in /metrics; an index of another model ends the service naming the file.
#include <gtest/gtest.h>
#include <httplib.h>
#include <json/json.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "sparsenet/ann_index.h"
#include "sparsenet/dataset.h"
#include "sparsenet/recommender.h"
#include "support/serve_process.h"
#include "support/test_support.h"
#include "test_configs.h"

extern char** environ;

namespace sparsenet {
namespace {

using testing::TempDir;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kItems = 40, kUsers = 120;

int cli(const std::string& args, std::string* out) {
    return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, out);
}

using Server = testing::ServeProcess;
using testing::parse_json;
using testing::write_json;

// Polls /health until it answers 200 (a test failure if the server exits or 2 minutes pass).
void wait_until_healthy(Server& server, httplib::Client& http) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    for (;;) {
        auto res = http.Get("/health");
        if (res && res->status == 200) return;
        ASSERT_FALSE(server.exited()) << server.log();
        ASSERT_LT(Clock::now(), deadline) << server.log();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

// A client of `server` once it is healthy (wait_until_healthy: the caller checks
// HasFatalFailure()).
std::unique_ptr<httplib::Client> healthy_client(Server& server) {
    EXPECT_GT(server.port(), 0) << server.log();
    auto http = std::make_unique<httplib::Client>("127.0.0.1", server.port());
    http->set_read_timeout(120, 0);
    wait_until_healthy(server, *http);
    return http;
}

class AnnCli : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        const std::string config = file("net.json");
        testing::write_file(config, kCliAutoencoderJson);
        std::string out;
        ASSERT_EQ(cli("generate -o " + file("data.nc") + " --users " + std::to_string(kUsers) +
                          " --items " + std::to_string(kItems) + " --nnz 900 --seed 2 -q",
                      &out),
                  0)
            << out;
        for (const auto& [name, seed] : {std::pair<const char*, int>{"a.nc", 1}, {"b.nc", 9}}) {
            ASSERT_EQ(cli("train -c " + config + " -i " + file("data.nc") + " -n " + file(name) +
                              " -b 16 -e 2 --seed " + std::to_string(seed) + " --device cpu -q",
                          &out),
                      0)
                << out;
        }
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        if (!ann_index_available("hnsw"))
            GTEST_SKIP() << "built without hnswlib (SPARSENET_HNSWLIB)";
    }
    static std::string file(const std::string& name) { return dir_->file(name); }
    static TempDir* dir_;
    TempDir work_;
};

TempDir* AnnCli::dir_ = nullptr;

TEST_F(AnnCli, AnnIndexCommandLineErrors) {
    std::string out;
    EXPECT_EQ(cli("ann-index -o " + work_.file("x.ann"), &out), 2) << out;
    EXPECT_NE(out.find("-n MODEL is required"), std::string::npos) << out;
    EXPECT_EQ(cli("ann-index -n " + file("a.nc"), &out), 2) << out;
    EXPECT_NE(out.find("-o FILE is required"), std::string::npos) << out;
    EXPECT_EQ(
        cli("ann-index -n " + file("a.nc") + " -o " + work_.file("x.ann") + " --kind kd", &out), 2)
        << out;
    EXPECT_NE(out.find("--kind 'kd'"), std::string::npos) << out;
    EXPECT_EQ(
        cli("ann-index -n " + file("a.nc") + " -o " + work_.file("x.ann") + " --vectors fp8", &out),
        2)
        << out;
    EXPECT_NE(out.find("--vectors 'fp8': expected fp32, fp16 or bf16"), std::string::npos) << out;
    EXPECT_EQ(
        cli("ann-index -n " + file("a.nc") + " -o " + work_.file("x.ann") + " --hnsw-m 0x", &out),
        2)
        << out;
    EXPECT_NE(out.find("--hnsw-m"), std::string::npos) << out;
    EXPECT_EQ(
        cli("ann-index -n " + file("a.nc") + " -o " + work_.file("x.ann") + " --cells -3", &out), 2)
        << out;
    EXPECT_NE(out.find("--cells"), std::string::npos) << out;
    EXPECT_EQ(
        cli("ann-index -n " + file("a.nc") + " -o " + work_.file("x.ann") + " --cells 4 --probe 5",
            &out),
        2)
        << out;
    EXPECT_NE(out.find("--probe 5: expected at most the 4 cells"), std::string::npos) << out;
    EXPECT_EQ(cli("ann-index -n " + work_.file("missing.nc") + " -o " + work_.file("x.ann"), &out),
              1)
        << out;
    EXPECT_NE(out.find("missing.nc"), std::string::npos) << out;
    EXPECT_EQ(cli("ann-index -n " + file("a.nc") + " -o " + work_.file("no/dir/x.ann"), &out), 1)
        << out;
    EXPECT_NE(out.find("no/dir/x.ann"), std::string::npos) << out;
    // A dataset file is no model.
    EXPECT_NE(cli("ann-index -n " + file("data.nc") + " -o " + work_.file("x.ann"), &out), 0)
        << out;
    EXPECT_NE(out.find("data.nc"), std::string::npos) << out;
}

TEST_F(AnnCli, ServeAnnCommandLineErrors) {
    std::string out;
    EXPECT_EQ(cli("serve -n " + file("a.nc") + " --ann-probe 4", &out), 2) << out;
    EXPECT_NE(out.find("--ann-probe"), std::string::npos) << out;
    EXPECT_EQ(cli("serve --port 0 -n " + file("a.nc") + " --ann " + work_.file("none.ann"), &out),
              1)
        << out;
    EXPECT_NE(out.find("none.ann"), std::string::npos) << out;
    EXPECT_NE(out.find("ann-index"), std::string::npos) << out;
    // An index of model b for model a: the load fails naming the file; the service exits 1.
    ASSERT_EQ(
        cli("ann-index -n " + file("b.nc") + " -o " + work_.file("b.ann") + " --kind flat", &out),
        0)
        << out;
    Server server("-n " + file("a.nc") + " --ann " + work_.file("b.ann"), work_.file("log"));
    EXPECT_EQ(server.wait_exit(), 1) << server.log();
    EXPECT_NE(
        server.log().find(work_.file("b.ann") + ": this ANN index was built from another model"),
        std::string::npos)
        << server.log();
    // Not an ANN index at all.
    testing::write_file(work_.file("text.ann"), "item0\t0\n");
    Server text("-n " + file("a.nc") + " --ann " + work_.file("text.ann"), work_.file("log2"));
    EXPECT_EQ(text.wait_exit(), 1) << text.log();
    EXPECT_NE(text.log().find("not a sparsenet ANN index"), std::string::npos) << text.log();
}

TEST_F(AnnCli, ServeFromAFlatIndexAnswersExactlyAndCountsIndexQueries) {
    std::string out;
    const std::string index = work_.file("a.ann");
    ASSERT_EQ(
        cli("ann-index -n " + file("a.nc") + " -o " + index + " --kind flat --vectors fp32", &out),
        0)
        << out;
    EXPECT_NE(out.find("40 items"), std::string::npos) << out;
    EXPECT_NE(out.find("fp32 vectors"), std::string::npos) << out;
    Server server("-n " + file("a.nc") + " --threads 2 --ann " + index, work_.file("serve.log"));
    const auto http = healthy_client(server);
    if (HasFatalFailure()) return;
    EXPECT_NE(server.log().find("ANN index " + index), std::string::npos) << server.log();
    const Recommender exact(file("a.nc"));
    const Dataset d = Dataset::read(file("data.nc"), "gl_input");
    Json::Value batch(Json::arrayValue);
    std::vector<Recommendations> wanted;
    uint32_t singles = 0;
    for (uint64_t u = 0; u < 60; ++u) {
        Json::Value q(Json::objectValue);
        std::vector<ItemRef> items;
        q["items"] = Json::Value(Json::arrayValue);
        for (uint64_t e = d.offsets[u]; e < d.offsets[u + 1]; ++e) {
            q["items"].append(d.indices[e]);
            items.emplace_back(d.indices[e]);
        }
        RecommendOptions o;
        o.k = 1 + u % 12;
        q["k"] = o.k;
        if (u % 3 == 1) {
            q["exclude"] = Json::Value(Json::arrayValue);
            for (uint32_t i : {3u, 7u, 11u}) {
                q["exclude"].append(i);
                o.deny.emplace_back(i);
            }
        }
        if (u % 3 == 2) {
            q["allow"] = Json::Value(Json::arrayValue);
            for (uint32_t i = 0; i < kItems; i += 2) {
                q["allow"].append(i);
                o.allow.emplace_back(i);
            }
        }
        const Recommendations want = exact.recommend(items, o);
        auto res = http->Post("/recommend", write_json(q), "application/json");
        ASSERT_TRUE(res) << server.log();
        ASSERT_EQ(res->status, 200) << res->body;
        ++singles;
        const Json::Value got = parse_json(res->body);
        ASSERT_EQ(got["items"].size(), want.items.size()) << "user " << u << ": " << res->body;
        for (Json::ArrayIndex i = 0; i < got["items"].size(); ++i) {
            EXPECT_EQ(got["items"][i]["id"].asUInt(), want.items[i].id) << "user " << u;
            EXPECT_EQ(float(got["items"][i]["score"].asDouble()), want.items[i].score)
                << "user " << u;
        }
        batch.append(q);
        wanted.push_back(want);
    }
    auto res = http->Post("/recommend/batch", write_json(batch), "application/json");
    ASSERT_TRUE(res) << server.log();
    ASSERT_EQ(res->status, 200) << res->body;
    const Json::Value got = parse_json(res->body);
    ASSERT_EQ(got["results"].size(), wanted.size());
    for (Json::ArrayIndex u = 0; u < got["results"].size(); ++u) {
        ASSERT_EQ(got["results"][u]["items"].size(), wanted[u].items.size()) << "query " << u;
        for (Json::ArrayIndex i = 0; i < wanted[u].items.size(); ++i) {
            EXPECT_EQ(got["results"][u]["items"][i]["id"].asUInt(), wanted[u].items[i].id);
        }
    }
    auto metrics = http->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("sparsenet_ann_queries_total " +
                                 std::to_string(singles + wanted.size())),
              std::string::npos)
        << metrics->body;
}

// The smallest serving process: a 16-bit index (the default), BF16 input weights and, in bf16
// precision, only BF16 copies of the other weights (--ann and --bf16-weights-only were refused
// together before 16-bit vectors).
TEST_F(AnnCli, ServeAnnWithBf16Weights) {
    std::string out;
    const std::string index = work_.file("h.ann");
    ASSERT_EQ(cli("ann-index -n " + file("a.nc") + " -o " + index, &out), 0) << out;
    EXPECT_NE(out.find("fp16 vectors"), std::string::npos) << out;
    Server server("-n " + file("a.nc") + " --ann " + index +
                      " --precision bf16 --bf16-weights-only --bf16-input-weights",
                  work_.file("serve.log"));
    const auto http = healthy_client(server);
    if (HasFatalFailure()) return;
    EXPECT_NE(server.log().find("BF16 input weights"), std::string::npos) << server.log();
    auto q = http->Post("/recommend", R"({"items": [1, 2], "k": 3})", "application/json");
    ASSERT_TRUE(q);
    ASSERT_EQ(q->status, 200) << q->body;
    EXPECT_EQ(parse_json(q->body)["items"].size(), 3u) << q->body;
}

// A SoftMax output layer (Mult-DAE's): ann-index builds its index, and serve --ann answers the
// exact path's items (a flat FP32 index) with their logits, saying so ("scores": "logits"); the
// default --fp16-screening auto keeps the probabilities (no "scores" field), and on screens by
// logits.
TEST_F(AnnCli, SoftmaxModelsAreServedByLogits) {
    std::string out;
    const std::string config = work_.file("softmax.json");
    testing::write_file(config, R"({"Version": 0.9, "Name": "mult", "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 16, "Activation": "Tanh"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
         "Activation": "SoftMax"}]})");
    const std::string model = work_.file("softmax.nc");
    ASSERT_EQ(cli("train -c " + config + " -i " + file("data.nc") + " -n " + model +
                      " -b 16 -e 2 --device cpu -q",
                  &out),
              0)
        << out;
    const std::string index = work_.file("softmax.ann");
    ASSERT_EQ(cli("ann-index -n " + model + " -o " + index + " --kind flat --vectors fp32", &out),
              0)
        << out;
    const Recommender exact(model);
    const std::vector<ItemRef> items{1, 2, 5};
    RecommendOptions o;
    o.k = 5;
    const Recommendations want = exact.recommend(items, o);
    ASSERT_EQ(want.items.size(), 5u);
    const std::string query = R"({"items": [1, 2, 5], "k": 5})";
    for (const char* flags : {"--ann", "--fp16-screening on", "auto"}) {
        SCOPED_TRACE(flags);
        const std::string mode = flags;
        const std::string args = mode == "--ann"  ? " --ann " + index
                                 : mode == "auto" ? std::string()
                                                  : " " + mode;
        Server server("-n " + model + args, work_.file(std::string("serve-") + flags[2] + ".log"));
        const auto http = healthy_client(server);
        if (HasFatalFailure()) return;
        auto res = http->Post("/recommend", query, "application/json");
        ASSERT_TRUE(res) << server.log();
        ASSERT_EQ(res->status, 200) << res->body;
        const Json::Value got = parse_json(res->body);
        ASSERT_EQ(got["items"].size(), want.items.size()) << res->body;
        for (Json::ArrayIndex i = 0; i < got["items"].size(); ++i)
            EXPECT_EQ(got["items"][i]["id"].asUInt(), want.items[i].id) << res->body;
        if (mode == "auto") {
            EXPECT_FALSE(got.isMember("scores")) << res->body;
            EXPECT_EQ(float(got["items"][0]["score"].asDouble()), want.items[0].score);
        } else {
            EXPECT_EQ(got["scores"].asString(), "logits") << res->body;
            // Logits' differences are the probabilities' log-ratios.
            const double ratio = double(want.items[1].score) / want.items[0].score;
            EXPECT_NEAR(
                std::exp(got["items"][1]["score"].asDouble() - got["items"][0]["score"].asDouble()),
                ratio, 1e-5 * ratio)
                << res->body;
        }
    }
}

// A reload of a retrained model is refused while its ANN index is the old model's: the old model
// keeps serving, the answer names the index; a rebuilt index lets the next reload through.
TEST_F(AnnCli, AReloadedModelMustMatchItsIndex) {
    std::string out;
    const std::string served = work_.file("served.nc"), index = work_.file("served.ann");
    std::filesystem::copy_file(file("a.nc"), served);
    ASSERT_EQ(cli("ann-index -n " + served + " -o " + index + " --kind flat", &out), 0) << out;
    Server server("-n " + served + " --ann " + index, work_.file("serve.log"));
    const auto http = healthy_client(server);
    if (HasFatalFailure()) return;
    std::filesystem::copy_file(file("b.nc"), served + ".tmp");
    std::filesystem::rename(served + ".tmp", served);
    auto refused = http->Post("/reload", "", "application/json");
    ASSERT_TRUE(refused) << server.log();
    EXPECT_EQ(refused->status, 500) << refused->body;
    EXPECT_NE(refused->body.find("served.ann: this ANN index was built from another model"),
              std::string::npos)
        << refused->body;
    EXPECT_EQ(parse_json(refused->body)["model_version"].asUInt(), 1u) << refused->body;
    auto q = http->Post("/recommend", R"({"items": [1, 2], "k": 3})", "application/json");
    ASSERT_TRUE(q);
    EXPECT_EQ(q->status, 200) << q->body;
    // The index rebuilt for the new model (written beside, renamed over): the reload goes through.
    ASSERT_EQ(cli("ann-index -n " + served + " -o " + index + ".tmp --kind flat", &out), 0) << out;
    std::filesystem::rename(index + ".tmp", index);
    auto ok = http->Post("/reload", "", "application/json");
    ASSERT_TRUE(ok) << server.log();
    EXPECT_EQ(ok->status, 200) << ok->body;
    EXPECT_EQ(parse_json(ok->body)["model_version"].asUInt(), 2u) << ok->body;
}

}  // namespace
}  // namespace sparsenet

// sparsenet evaluate (model mode and recs-file mode) and train --validate-* / --keep-best, end to
// end: both modes give the same metrics on the same lists, a recs file written by hand scores as
// computed by hand, every malformed recs line is an error naming file:line, and the model kept by
// --keep-best is the best epoch's (its metrics are the ones printed for that epoch).
#include <gtest/gtest.h>
#include <json/json.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sparsenet/dataset.h"
#include "sparsenet/index_file.h"
#include "sparsenet/network.h"
#include "support/test_support.h"
#include "test_configs.h"

namespace sparsenet {
namespace {

using testing::TempDir;

// The small autoencoder the CLI tests train (tests/data/configs/cli_autoencoder.json).
const char* kConfig = kCliAutoencoderJson;

const char* kMetrics[] = {"recall", "nrecall", "precision", "ndcg", "map", "hit_rate", "coverage"};

Json::Value parse_json(const std::string& text) {
    Json::CharReaderBuilder builder;
    Json::Value v;
    std::string errors;
    std::istringstream in(text);
    EXPECT_TRUE(Json::parseFromStream(builder, in, &v, &errors)) << errors << "\n" << text;
    return v;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

class EvaluateCli : public ::testing::Test {
  protected:
    void SetUp() override {
        config_ = dir_.file("net.json");
        testing::write_file(config_, kConfig);
        data_ = dir_.file("data.nc");
        heldout_ = dir_.file("heldout.nc");
        ASSERT_EQ(run("generate -o " + data_ + " --users 120 --items 40 --nnz 900 --seed 2 " +
                      "--holdout 0.25 --heldout-output " + heldout_ + " -q"),
                  0)
            << out_;
        model_ = dir_.file("model.nc");
        samples_ = dir_.file("samples.index");
        features_ = dir_.file("features.index");
        std::vector<std::string> users, items;
        for (int u = 0; u < 120; ++u) users.push_back("user-" + std::to_string(u));
        for (int i = 0; i < 40; ++i) items.push_back("item-" + std::to_string(i));
        write_index(samples_, users);
        write_index(features_, items);
    }

    int run(const std::string& args) {
        return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, &out_);
    }

    void expect_failure(const std::string& args, const std::vector<std::string>& mentions,
                        int code = 1) {
        const int rc = run(args);
        EXPECT_EQ(rc, code) << args << "\n" << out_;
        for (const std::string& m : mentions) {
            EXPECT_NE(out_.find(m), std::string::npos) << "missing '" << m << "' in: " << out_;
        }
    }

    void train(const std::string& extra = "") {
        ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model_ +
                      " -b 16 -e 3 --optimizer adam --learning-rate 0.01 " + extra),
                  0)
            << out_;
    }

    // Every metric at every K of two JSON objects (written with 17 significant digits).
    void expect_same_metrics(const Json::Value& a, const Json::Value& b, const std::vector<int>& ks,
                             double tolerance, const std::string& what) {
        EXPECT_EQ(a["users"].asUInt64(), b["users"].asUInt64()) << what;
        EXPECT_GT(a["users"].asUInt64(), 50u) << what;
        for (int k : ks) {
            for (const char* m : kMetrics) {
                const std::string key = std::string(m) + "@" + std::to_string(k);
                ASSERT_TRUE(a.isMember(key) && b.isMember(key)) << what << " " << key;
                EXPECT_NEAR(a[key].asDouble(), b[key].asDouble(), tolerance) << what << " " << key;
            }
        }
    }

    std::string evaluate_model(const std::string& json, const std::string& extra = "") {
        EXPECT_EQ(run("evaluate -n " + model_ + " --input " + data_ + " --heldout " + heldout_ +
                      " -k 5,10 --json " + json + " " + extra),
                  0)
            << out_;
        return out_;
    }

    TempDir dir_;
    std::string config_, data_, heldout_, model_, samples_, features_, out_;
};

TEST_F(EvaluateCli, ModelModeAndRecsModeAgree) {
    train();
    const std::string per_user = dir_.file("per-user.tsv");
    const std::string table =
        evaluate_model(dir_.file("model.json"),
                       "--popularity --per-user " + per_user + " --samples-index " + samples_);
    EXPECT_NE(table.find("Recall@5"), std::string::npos) << table;
    EXPECT_NE(table.find("Coverage@10"), std::string::npos) << table;
    EXPECT_NE(table.find("popularity"), std::string::npos) << table;
    const Json::Value model = parse_json(testing::read_file(dir_.file("model.json")));
    EXPECT_EQ(model["mode"].asString(), "model");
    EXPECT_EQ(model["model"]["items"].asUInt(), 40u);

    // predict -s with index files (train items excluded), then evaluate --recs.
    const std::string recs = dir_.file("recs.txt");
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 10 -s " + recs +
                  " --samples-index " + samples_ + " -o " + features_),
              0)
        << out_;
    ASSERT_EQ(
        run("evaluate --recs " + recs + " --heldout " + heldout_ + " --samples-index " + samples_ +
            " --features-index " + features_ + " -k 5,10 --json " + dir_.file("recs.json")),
        0)
        << out_;
    EXPECT_NE(out_.find("0 held-out users absent"), std::string::npos) << out_;
    const Json::Value recs_json = parse_json(testing::read_file(dir_.file("recs.json")));
    EXPECT_EQ(recs_json["mode"].asString(), "recs");
    expect_same_metrics(model["model"], recs_json["recs"], {5, 10}, 0.0, "predict -s");

    // Every item ranked, train items kept, then dropped by evaluate --input: the same lists.
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 40 --keep-input -s " + recs +
                  " --samples-index " + samples_ + " -o " + features_),
              0)
        << out_;
    ASSERT_EQ(run("evaluate --recs " + recs + " --heldout " + heldout_ + " --input " + data_ +
                  " --samples-index " + samples_ + " --features-index " + features_ +
                  " -k 5,10 --popularity --json " + dir_.file("kept.json")),
              0)
        << out_;
    const Dataset train = Dataset::read(data_, "gl_input");
    EXPECT_NE(out_.find("dropped " + std::to_string(train.nnz()) + " train items"),
              std::string::npos)
        << out_;
    const Json::Value kept = parse_json(testing::read_file(dir_.file("kept.json")));
    EXPECT_EQ(kept["recs_file"]["dropped_train_items"].asUInt64(), train.nnz());
    expect_same_metrics(model["model"], kept["recs"], {5, 10}, 0.0, "--keep-input, dropped");
    expect_same_metrics(model["popularity"], kept["popularity"], {5, 10}, 0.0, "popularity");

    // The per-user file: a header and one line per evaluated user, named from the index; its
    // recall@10 column averages to the printed Recall@10.
    const std::vector<std::string> lines = lines_of(testing::read_file(per_user));
    ASSERT_EQ(lines.size(), model["model"]["users"].asUInt64() + 1);
    EXPECT_EQ(lines[0].substr(0, 22), "user\theldout\thits@5\tre");
    double recall10 = 0.0;
    std::vector<std::string> absent_names;
    double absent_recall10 = 0.0;
    for (size_t i = 1; i < lines.size(); ++i) {
        std::istringstream fields(lines[i]);
        std::vector<std::string> f;
        for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
        ASSERT_EQ(f.size(), 2u + 2u * 6u) << lines[i];
        EXPECT_EQ(f[0].rfind("user-", 0), 0u) << lines[i];
        recall10 += std::stod(f[2 + 6 + 1]);
        if (i <= 3) {  // three users whose lines are removed from the recs file below
            absent_names.push_back(f[0]);
            absent_recall10 += std::stod(f[2 + 6 + 1]);
        }
    }
    const double users = double(lines.size() - 1);
    EXPECT_NEAR(recall10 / users, model["model"]["recall@10"].asDouble(), 1e-8);

    // Users of the held-out set absent from the recs file count as zero hits.
    ASSERT_EQ(run("predict -n " + model_ + " --input " + data_ + " -k 10 -s " + recs +
                  " --samples-index " + samples_ + " -o " + features_),
              0)
        << out_;
    std::string kept_lines;
    for (const std::string& line : lines_of(testing::read_file(recs))) {
        const std::string name = line.substr(0, line.find('\t'));
        if (std::find(absent_names.begin(), absent_names.end(), name) == absent_names.end()) {
            kept_lines += line + "\n";
        }
    }
    testing::write_file(recs, kept_lines);
    ASSERT_EQ(
        run("evaluate --recs " + recs + " --heldout " + heldout_ + " --samples-index " + samples_ +
            " --features-index " + features_ + " -k 10 --json " + dir_.file("absent.json")),
        0)
        << out_;
    EXPECT_NE(out_.find("3 held-out users absent from the file count as zero hits"),
              std::string::npos)
        << out_;
    const Json::Value absent = parse_json(testing::read_file(dir_.file("absent.json")));
    EXPECT_EQ(absent["recs"]["users"].asUInt64(), model["model"]["users"].asUInt64());
    EXPECT_NEAR(absent["recs"]["recall@10"].asDouble(), (recall10 - absent_recall10) / users, 1e-8);
}

TEST_F(EvaluateCli, HandWrittenRecsFileScoresAsComputedByHand) {
    // What a Python peer writes: names from index files, DSSTNE's trailing ':' accepted, users
    // in any order, a user without held-out items, a held-out user missing from the file.
    // Held-out: alice {b, d}, bob {a}, carol {}, dave {e}.
    Dataset h;
    h.name = "heldout";
    h.rows = 4;
    h.cols = 5;
    h.offsets = {0, 2, 3, 3, 4};
    h.indices = {1, 3, 0, 4};
    const std::string heldout = dir_.file("h.nc");
    write_datasets(heldout, {h});
    const std::string users = dir_.file("users.index"), items = dir_.file("items.index");
    write_index(users, {"alice", "bob", "carol", "dave"});
    write_index(items, {"a", "b", "c", "d", "e"});
    const std::string recs = dir_.file("peer.txt");
    testing::write_file(recs,
                        "bob\tc,0.9:a,0.8:b,0.1:\n"
                        "carol\ta,3:b,2\n"
                        "alice\td,5:a,4:b,4\n");
    ASSERT_EQ(
        run("evaluate --recs " + recs + " --heldout " + heldout + " --samples-index " + users +
            " --features-index " + items + " -k 1,2 --json " + dir_.file("peer.json")),
        0)
        << out_;
    EXPECT_NE(out_.find("1 held-out users absent"), std::string::npos) << out_;
    const Json::Value r = parse_json(testing::read_file(dir_.file("peer.json")))["recs"];
    // Users alice, bob, dave. K = 1: alice [d] hit (1/2), bob [c] miss, dave absent.
    // K = 2: alice [d, a] 1 hit (recall 1/2, nrecall 1/2, AP (1/1)/2), bob [c, a] hit at 2
    // (recall 1, AP (1/2)/1, NDCG 1/log2(3)).
    EXPECT_EQ(r["users"].asUInt64(), 3u);
    EXPECT_NEAR(r["recall@1"].asDouble(), (0.5 + 0 + 0) / 3, 1e-12);
    EXPECT_NEAR(r["nrecall@1"].asDouble(), (1.0 + 0 + 0) / 3, 1e-12);
    EXPECT_NEAR(r["precision@1"].asDouble(), 1.0 / 3, 1e-12);
    EXPECT_NEAR(r["recall@2"].asDouble(), (0.5 + 1 + 0) / 3, 1e-12);
    EXPECT_NEAR(r["precision@2"].asDouble(), (0.5 + 0.5) / 3, 1e-12);
    EXPECT_NEAR(r["map@2"].asDouble(), (0.5 + 0.5 + 0) / 3, 1e-12);
    EXPECT_NEAR(r["ndcg@2"].asDouble(),
                (1.0 / (1 + 1 / std::log2(3.0)) + 1 / std::log2(3.0) + 0) / 3, 1e-12);
    EXPECT_NEAR(r["hit_rate@2"].asDouble(), 2.0 / 3, 1e-12);
    // Top-2 of alice and bob: {d, a, c} of 5 items (carol has no held-out item: not counted).
    EXPECT_NEAR(r["coverage@2"].asDouble(), 3.0 / 5, 1e-12);
    EXPECT_EQ(r["covered_items@2"].asUInt64(), 3u);

    // The same file with row and column numbers instead of names (predict's default).
    testing::write_file(recs, "1\t2,0.9:0,0.8:1,0.1\n2\t0,3:1,2\n0\t3,5:0,4:1,4\n");
    ASSERT_EQ(run("evaluate --recs " + recs + " --heldout " + heldout + " -k 1,2 --json " +
                  dir_.file("numbers.json")),
              0)
        << out_;
    const Json::Value n = parse_json(testing::read_file(dir_.file("numbers.json")))["recs"];
    for (const std::string& key : r.getMemberNames()) {
        EXPECT_EQ(n[key], r[key]) << key;
    }
}

TEST_F(EvaluateCli, MalformedRecsLinesNameFileAndLine) {
    const std::string heldout = dir_.file("h.nc");
    Dataset h;
    h.name = "heldout";
    h.rows = 3;
    h.cols = 4;
    h.offsets = {0, 1, 2, 3};
    h.indices = {0, 1, 2};
    write_datasets(heldout, {h});
    const std::string users = dir_.file("u.index"), items = dir_.file("i.index");
    write_index(users, {"u0", "u1", "u2"});
    write_index(items, {"i0", "i1", "i2", "i3"});
    const std::string recs = dir_.file("bad.txt");
    const std::string command = "evaluate --recs " + recs + " --heldout " + heldout +
                                " --samples-index " + users + " --features-index " + items +
                                " -k 2";
    const std::string good = "u0\ti1,0.9:i0,0.5\n";
    struct Case {
        std::string line2;
        std::vector<std::string> mentions;
    };
    const std::vector<Case> cases = {
        {"u1 i1,0.9:i0,0.5", {"no tab"}},
        {"u1\ti1,high:i0,0.5", {"score 'high' is not a number"}},
        {"u1\ti1,nan:i0,0.5", {"score 'nan' is not a number"}},
        {"u1\ti1,:i0,0.5", {"score '' is not a number"}},
        {"u1\ti1:i0,0.5", {"'i1': expected 'item,score'"}},
        {"u1\ti1,0.9::i0,0.5", {"expected 'item,score'"}},
        {"nobody\ti1,0.9:i0,0.5", {"unknown user 'nobody'", "samples index"}},
        {"u1\ti1,0.9:i9,0.5", {"unknown item 'i9'", "features index"}},
        {"u0\ti2,0.9:i3,0.5", {"user 'u0' already has a list on line 1"}},
        {"u1\ti1,0.9:i1,0.5", {"item 'i1' is listed twice"}},
        {"u1\ti1,0.5:i0,0.9", {"score 0.9 is above the previous one", "descending"}},
    };
    for (const Case& c : cases) {
        testing::write_file(recs, good + c.line2 + "\n");
        std::vector<std::string> mentions = c.mentions;
        mentions.push_back("bad.txt:2:");
        expect_failure(command, mentions);
    }
    // Numbers instead of names: out of range is unknown.
    testing::write_file(recs, "0\t1,0.9:0,0.5\n3\t1,0.9\n");
    expect_failure("evaluate --recs " + recs + " --heldout " + heldout + " -k 1",
                   {"bad.txt:2:", "unknown user '3'", "row number below 3"});
    testing::write_file(recs, "0\t1,0.9:4,0.5\n");
    expect_failure("evaluate --recs " + recs + " --heldout " + heldout + " -k 1",
                   {"bad.txt:1:", "unknown item '4'", "column number below 4"});
    // Lists shorter than the largest K everywhere.
    testing::write_file(recs, good);
    expect_failure(command + ",5", {"bad.txt", "longest list has 2 items", "K = 5"});
    expect_failure("evaluate --recs " + dir_.file("missing.txt") + " --heldout " + heldout,
                   {"missing.txt"});
}

TEST_F(EvaluateCli, BadOptionsAreUsageErrors) {
    const std::string base = " --heldout " + heldout_;
    expect_failure("evaluate" + base, {"-n", "--recs"}, 2);
    expect_failure("evaluate -n " + model_ + " --recs x.txt" + base, {"not both"}, 2);
    expect_failure("evaluate -n " + model_ + base, {"--input"}, 2);
    expect_failure("evaluate --recs x.txt --popularity" + base, {"--popularity", "--input"}, 2);
    expect_failure("evaluate --recs x.txt -k 0" + base, {"-k", "'0'"}, 2);
    expect_failure("evaluate --recs x.txt -k 5,x" + base, {"-k", "'x'"}, 2);
    expect_failure("evaluate --recs x.txt -k 5,5" + base, {"-k", "twice"}, 2);
    expect_failure("evaluate -n " + model_ + " --input " + data_ + " --features-index f" + base,
                   {"--features-index", "--recs"}, 2);
    const std::string train = "train -c " + config_ + " -i " + data_ + " -n " + model_ + " -e 1 ";
    expect_failure(train + "--validate-input " + data_, {"--validate-target"}, 2);
    expect_failure(train + "--validate-target " + heldout_, {"--validate-input"}, 2);
    expect_failure(train + "--keep-best recall@20", {"--keep-best", "--validate-input"}, 2);
    expect_failure(train + "--validate-k 10", {"--validate-k", "--validate-input"}, 2);
    const std::string validated =
        train + "--validate-input " + data_ + " --validate-target " + heldout_ + " ";
    expect_failure(validated + "--keep-best f1@20", {"unknown metric 'f1'", "ndcg"}, 2);
    expect_failure(validated + "--keep-best recall", {"METRIC@K"}, 2);
    expect_failure(validated + "--keep-best recall@0", {"--keep-best", "'0'"}, 2);
    EXPECT_FALSE(std::filesystem::exists(model_));
}

// Parameters of a model file, by name.
std::map<std::string, std::vector<float>> parameters_of(const std::string& path) {
    const Network net = Network::load(path);
    std::map<std::string, std::vector<float>> values;
    for (const Parameter& p : net.parameters()) values[p.name] = net.get_parameter(p.name);
    return values;
}

TEST_F(EvaluateCli, KeepBestKeepsTheBestEpochAndItsMetrics) {
    // The held-out items of the training users as the validation target (their train items are
    // the validation input). With these settings the metric rises, peaks and falls again (the
    // best epoch was 4 of 6 on the machine this was written on; the test does not depend on it).
    const std::string metrics = dir_.file("m.jsonl");
    const std::string common = " -b 16 -e 6 --optimizer adam --learning-rate 0.01 --seed 3 ";
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model_ + common +
                  "--validate-input " + data_ + " --validate-target " + heldout_ +
                  " --validate-k 5,10 --keep-best ndcg@10 --metrics-out " + metrics),
              0)
        << out_;
    const std::string printed = out_;
    const std::vector<std::string> epochs = lines_of(testing::read_file(metrics));
    ASSERT_EQ(epochs.size(), 6u);
    uint32_t best = 0;
    double best_ndcg = -1.0;
    Json::Value best_validation;
    std::vector<double> losses;
    for (const std::string& line : epochs) {
        const Json::Value e = parse_json(line);
        ASSERT_TRUE(e.isMember("validation")) << line;
        losses.push_back(e["loss"].asDouble());
        const double ndcg = e["validation"]["ndcg@10"].asDouble();
        if (ndcg > best_ndcg) {
            best_ndcg = ndcg;
            best = e["epoch"].asUInt();
            best_validation = e["validation"];
        }
        // The printed validation line of the epoch says the same (4 decimals).
        char recall[64];
        std::snprintf(recall, sizeof recall, "Recall@10 %.4f",
                      e["validation"]["recall@10"].asDouble());
        EXPECT_NE(printed.find(recall), std::string::npos) << recall << "\n" << printed;
    }
    std::printf("kept epoch %u of 6 (ndcg@10 %.4f)\n", best, best_ndcg);
    EXPECT_NE(printed.find("kept the model of epoch " + std::to_string(best) + " "),
              std::string::npos)
        << printed;

    // The kept model, evaluated on its own (same batch size, so the same scores), gives the
    // metrics the best epoch printed.
    ASSERT_EQ(run("evaluate -n " + model_ + " --input " + data_ + " --heldout " + heldout_ +
                  " -k 5,10 -b 16 --json " + dir_.file("kept.json")),
              0)
        << out_;
    const Json::Value kept = parse_json(testing::read_file(dir_.file("kept.json")));
    expect_same_metrics(kept["model"], best_validation, {5, 10}, 1e-12, "kept model");

    // Validation does not disturb training: the same run without it has the same losses, and
    // stopping it after `best` epochs gives the kept model bit for bit.
    const std::string plain = dir_.file("plain.nc");
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + plain + common +
                  "--metrics-out " + dir_.file("plain.jsonl")),
              0)
        << out_;
    std::vector<double> plain_losses;
    for (const std::string& line : lines_of(testing::read_file(dir_.file("plain.jsonl")))) {
        const Json::Value e = parse_json(line);
        EXPECT_FALSE(e.isMember("validation"));
        plain_losses.push_back(e["loss"].asDouble());
    }
    EXPECT_EQ(plain_losses, losses);
    std::string shorter = common;
    shorter.replace(shorter.find("-e 6"), 4, "-e " + std::to_string(best));
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + plain + shorter + "-q"), 0)
        << out_;
    EXPECT_EQ(parameters_of(plain), parameters_of(model_));
}

TEST_F(EvaluateCli, ValidationWithoutKeepBestWritesTheLastModel) {
    const std::string common = " -b 16 -e 2 --optimizer adam --learning-rate 0.01 ";
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model_ + common +
                  "--validate-input " + data_ + " --validate-target " + heldout_),
              0)
        << out_;
    EXPECT_NE(out_.find("validation Recall@20"), std::string::npos) << out_;
    EXPECT_NE(out_.find("model written to"), std::string::npos) << out_;
    const std::string plain = dir_.file("plain.nc");
    ASSERT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + plain + common + "-q"), 0)
        << out_;
    EXPECT_EQ(parameters_of(plain), parameters_of(model_));
    // A validation target that does not match the input's rows is refused before training.
    const std::string other = dir_.file("other.nc");
    ASSERT_EQ(run("generate -o " + other + " --users 50 --items 40 --nnz 300 --seed 4 -q"), 0)
        << out_;
    expect_failure("train -c " + config_ + " -i " + data_ + " -n " + dir_.file("x.nc") + common +
                       "--validate-input " + data_ + " --validate-target " + other,
                   {"other.nc", "50 rows", "120"});
    EXPECT_FALSE(std::filesystem::exists(dir_.file("x.nc")));
}

}  // namespace
}  // namespace sparsenet

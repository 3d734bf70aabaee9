// Issue 23: DSSTNE's MovieLens recipe (samples/movielens/run_movielens_sample.sh) flag for flag,
// on MovieLens 100K in DSSTNE's text format (tests/cli/fixtures/ml100k) with DSSTNE's own sample
// config; predict's DSSTNE flags (-d -r -i -o -f -s -b -k -p -l) and their errors; convert without
// index files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "sparsenet/dataset.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kFixture = std::string(SPARSENET_SOURCE_DIR) + "/tests/cli/fixtures/ml100k";
const std::string kConfig = std::string(SPARSENET_SOURCE_DIR) +
                            "/tests/config/dsstne-configs/samples_movielens_config.json";

// A recs or text line: the name, then (feature, value) pairs.
struct Line {
    std::string name;
    std::vector<std::pair<std::string, std::string>> entries;
    bool trailing_colon = false;
};

std::vector<Line> parse(const std::string& text) {
    std::vector<Line> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        Line l;
        const size_t tab = line.find('\t');
        l.name = line.substr(0, tab);
        const std::string rest = line.substr(tab + 1);
        l.trailing_colon = !rest.empty() && rest.back() == ':';
        std::istringstream es(rest);
        std::string e;
        while (std::getline(es, e, ':')) {
            if (e.empty()) continue;
            const size_t comma = e.find(',');
            l.entries.emplace_back(e.substr(0, comma),
                                   comma == std::string::npos ? "" : e.substr(comma + 1));
        }
        out.push_back(std::move(l));
    }
    return out;
}

std::set<std::string> files_in(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

class DsstneRecipe : public ::testing::Test {
  protected:
    // The recipe's data and model, made once for every test.
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        fs::copy_file(kFixture + "/ml_ratings", dir_->file("ml_ratings"));
        fs::copy_file(kConfig, dir_->file("config.json"));
        for (const char* step :
             {"convert -d gl_input -i ml_ratings -o gl_input.nc -f features_input -s "
              "samples_input -c",
              "convert -d gl_output -i ml_ratings -o gl_output.nc -f features_output -s "
              "samples_input -c",
              "train -c config.json -i gl_input.nc -o gl_output.nc -n gl.nc -b 256 -e 10"}) {
            std::string out;
            ASSERT_EQ(run_in(*dir_, step, &out), 0) << step << "\n" << out;
        }
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }

    static int run_in(const TempDir& dir, const std::string& args, std::string* out) {
        return testing::run_command("cd " + dir.path() + " && " + SPARSENET_CLI_PATH + " " + args,
                                    out);
    }
    int run(const std::string& args) { return run_in(*dir_, args, &out_); }

    // The recipe's predict step with `change` appended (a later flag wins).
    std::string predict(const std::string& change = "") {
        return "predict -b 256 -d gl -i features_input -o features_output -k 10 -n gl.nc -f "
               "ml_ratings -s recs -r ml_ratings " +
               change;
    }

    // Fails with exit code `code`, names every string of `mentions`, and leaves no recs file.
    void expect_refused(const std::string& args, int code,
                        const std::vector<std::string>& mentions) {
        fs::remove(dir_->file("recs"));
        EXPECT_EQ(run(args), code) << args << "\n" << out_;
        for (const std::string& m : mentions) {
            EXPECT_NE(out_.find(m), std::string::npos) << "missing '" << m << "' in: " << out_;
        }
        EXPECT_FALSE(fs::exists(dir_->file("recs"))) << args;
        for (const std::string& f : files_in(dir_->path())) {
            EXPECT_EQ(f.find(".tmp."), std::string::npos) << f;
        }
    }

    static TempDir* dir_;
    std::string out_;
};

TempDir* DsstneRecipe::dir_ = nullptr;

TEST_F(DsstneRecipe, EveryUserGetsKRecommendationsInDsstnesFormatNoneOfThemFiltered) {
    const std::set<std::string> before = files_in(dir_->path());
    ASSERT_EQ(run(predict()), 0) << out_;
    const std::vector<Line> input = parse(testing::read_file(dir_->file("ml_ratings")));
    const std::vector<Line> recs = parse(testing::read_file(dir_->file("recs")));
    ASSERT_EQ(input.size(), 60u);
    ASSERT_EQ(recs.size(), input.size());
    const std::string features = "\n" + testing::read_file(dir_->file("features_output"));
    for (size_t u = 0; u < input.size(); ++u) {
        SCOPED_TRACE("user " + input[u].name);
        EXPECT_EQ(recs[u].name, input[u].name);  // every user, in -r's order
        ASSERT_EQ(recs[u].entries.size(), 10u);
        EXPECT_TRUE(recs[u].trailing_colon);  // DSSTNE ends every entry with ':'
        std::set<std::string> seen;
        for (const auto& [movie, timestamp] : input[u].entries) seen.insert(movie);
        double previous = 2.0;
        for (const auto& [movie, score] : recs[u].entries) {
            // The filter's values are timestamps: they exclude, never multiply.
            EXPECT_EQ(seen.count(movie), 0u) << movie << " was filtered";
            EXPECT_NE(features.find("\n" + movie + "\t"), std::string::npos) << movie;
            EXPECT_EQ(score.size(), 5u) << score;  // DSSTNE's default -p 4.3f: "0.123"
            const double s = std::stod(score);
            EXPECT_LE(s, previous);
            previous = s;
        }
    }
    // -r was read in memory: no .nc or index file of it in the current directory.
    std::set<std::string> after = files_in(dir_->path());
    after.erase("recs");
    EXPECT_EQ(after, before);
}

TEST_F(DsstneRecipe, OrderFollowsRAndUnknownFeaturesAreCountedAndDropped) {
    // Users in another order, one of them not in the training data, with unknown movies.
    testing::write_file(dir_->file("some"),
                        "7\t1,0:2,0\nnewcomer\t50,0:99999,0:not-a-movie,0\n3\t100\n");
    ASSERT_EQ(run(predict("-r some -f some -k 5")), 0) << out_;
    EXPECT_NE(out_.find("dropped 2 features of 2 distinct names not in -i features_input"),
              std::string::npos)
        << out_;
    const std::vector<Line> recs = parse(testing::read_file(dir_->file("recs")));
    ASSERT_EQ(recs.size(), 3u);
    EXPECT_EQ(recs[0].name, "7");
    EXPECT_EQ(recs[1].name, "newcomer");
    EXPECT_EQ(recs[2].name, "3");
    for (const Line& l : recs) EXPECT_EQ(l.entries.size(), 5u);
    for (const auto& e : recs[1].entries) EXPECT_NE(e.first, "50");
    for (const auto& e : recs[2].entries) EXPECT_NE(e.first, "100");
}

TEST_F(DsstneRecipe, FilterFolderScoreFormatAnyKAndLayer) {
    // -f as a folder of files; a filter user missing from -r is ignored.
    fs::create_directories(dir_->file("filters"));
    testing::write_file(dir_->file("filters/a"), "1\t50\n");
    testing::write_file(dir_->file("filters/b"), "2\t100,1.0\nghost\t1\n");
    testing::write_file(dir_->file("two"), "1\t1\n2\t1\n");
    ASSERT_EQ(run(predict("-r two -f filters -k 5000 -p .6f")), 0) << out_;
    const std::vector<Line> recs = parse(testing::read_file(dir_->file("recs")));
    ASSERT_EQ(recs.size(), 2u);
    // Any k: the whole catalogue (1,2 and 1 filtered item less), scores with 6 decimals.
    const size_t catalogue =
        parse(testing::read_file(dir_->file("features_output"))).size();  // one line each
    EXPECT_EQ(recs[0].entries.size(), catalogue - 1);
    EXPECT_EQ(recs[1].entries.size(), catalogue - 1);
    for (const auto& e : recs[0].entries) EXPECT_NE(e.first, "50");
    for (const auto& e : recs[1].entries) EXPECT_NE(e.first, "100");
    EXPECT_EQ(recs[0].entries[0].second.size(), 8u) << recs[0].entries[0].second;  // 0.xxxxxx
    // -p with '%', and -l naming the hidden layer (its units are numbered: no -o).
    ASSERT_EQ(run("predict -d gl -i features_input -n gl.nc -r two -l Hidden -k 3 -p %.2e -s recs"),
              0)
        << out_;
    const std::vector<Line> hidden = parse(testing::read_file(dir_->file("recs")));
    ASSERT_EQ(hidden.size(), 2u);
    ASSERT_EQ(hidden[0].entries.size(), 3u);
    EXPECT_LT(std::stoul(hidden[0].entries[0].first), 128u);
    EXPECT_NE(hidden[0].entries[0].second.find('e'), std::string::npos);
}

TEST_F(DsstneRecipe, BadInputToEachNewFlagIsNamedAndWritesNoRecs) {
    testing::write_file(dir_->file("malformed"), "1\t50:60\n2 100\n");
    testing::write_file(dir_->file("bad_index"), "50\t0\n60\n");
    expect_refused(predict("-r missing_file"), 1, {"option -r", "missing_file"});
    expect_refused(predict("-r malformed"), 1, {"option -r", "malformed:2", "missing tab"});
    expect_refused(predict("-f missing_filter"), 1, {"option -f", "missing_filter"});
    expect_refused(predict("-f malformed"), 1, {"option -f", "malformed:2"});
    expect_refused(predict("-i missing_index"), 1, {"option -i", "missing_index"});
    expect_refused(predict("-i bad_index"), 1, {"option -i", "bad_index:2"});
    expect_refused(predict("-o missing_index"), 1, {"option -o", "missing_index"});
    expect_refused(predict("-l Nope"), 2, {"option -l", "Nope", "Hidden, Output"});
    expect_refused(predict("-l Input"), 2, {"option -l", "non-input layer"});
    expect_refused(predict("-k 0"), 2, {"option -k", "at least 1"});
    expect_refused(predict("-k -3"), 2, {"option -k", "-3"});
    expect_refused(predict("-d nope"), 2, {"option -d", "nope_input", "'gl_input'"});
    expect_refused(predict("-p %s"), 2, {"option -p", "%s"});
    expect_refused(predict("-p 4.3f%n"), 2, {"option -p"});
    expect_refused(predict("-b 0"), 2, {"option -b"});
    expect_refused(predict("-n missing.nc"), 1, {"missing.nc"});
    expect_refused(predict("--input gl_input.nc"), 2, {"-r", "--input", "not both"});
    expect_refused(predict("--keep-input"), 2, {"--keep-input"});
    // A previous recs file is left as it was.
    testing::write_file(dir_->file("recs"), "old\n");
    EXPECT_EQ(run(predict("-r malformed")), 1);
    EXPECT_EQ(testing::read_file(dir_->file("recs")), "old\n");
}

TEST_F(DsstneRecipe, WithoutIndexFilesPredictUsesTheNamesInTheModel) {
    ASSERT_EQ(run(predict()), 0) << out_;
    const std::string with_index_files = testing::read_file(dir_->file("recs"));
    ASSERT_EQ(run("predict -b 256 -d gl -k 10 -n gl.nc -f ml_ratings -s recs -r ml_ratings"), 0)
        << out_;
    EXPECT_EQ(testing::read_file(dir_->file("recs")), with_index_files);
}

TEST_F(DsstneRecipe, TheModelCarriesItsFeatureNames) {
    // The recipe's model resolves movie ids with no index file.
    const Recommender r(dir_->file("gl.nc"));
    ASSERT_TRUE(r.has_names());
    const Recommendations got = r.recommend({"50", "100"}, 10);
    ASSERT_EQ(got.items.size(), 10u);
    const std::string features = "\n" + testing::read_file(dir_->file("features_output"));
    for (const Recommendation& item : got.items) {
        EXPECT_NE(item.name, "50");
        EXPECT_NE(item.name, "100");
        EXPECT_NE(features.find("\n" + item.name + "\t" + std::to_string(item.id) + "\n"),
                  std::string::npos)
            << item.name;
    }
}

class ConvertWithoutIndexFiles : public ::testing::Test {
  protected:
    int run(const std::string& args) {
        return testing::run_command("cd " + dir_.path() + " && " + SPARSENET_CLI_PATH + " " + args,
                                    &out_);
    }
    TempDir dir_;
    std::string out_;
};

TEST_F(ConvertWithoutIndexFiles, IdsAreIndicesAndTheWidthIsTheLargestIdPlusOne) {
    testing::write_file(dir_.file("train.txt"), "0 3 5\n2 1\n");
    for (const char* format : {"user-items", "lightgcn"}) {
        ASSERT_EQ(run(std::string("convert --format ") + format +
                      " -i train.txt -o t.nc -d gl_input,gl_output"),
                  0)
            << out_;
        const Dataset d = Dataset::read(dir_.file("t.nc"), "gl_input");
        EXPECT_EQ(d.rows, 3u);
        EXPECT_EQ(d.cols, 6u);
        EXPECT_EQ(d.indices, (std::vector<uint32_t>{3, 5, 1}));
        EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 2, 2, 3}));
        EXPECT_TRUE(d.feature_names.empty());
    }
    EXPECT_EQ(files_in(dir_.path()), (std::set<std::string>{"t.nc", "train.txt"}));
    ASSERT_EQ(run("convert -i train.txt -o w.nc -d x --width 10"), 0) << out_;
    EXPECT_EQ(Dataset::read(dir_.file("w.nc")).cols, 10u);
    // MovieLens files too (1-based ids: column 0 stays empty).
    testing::write_file(dir_.file("u.data"), "1\t5\t3\t881250949\n2\t7\t4\t881250950\n");
    ASSERT_EQ(run("convert -i u.data -o m.nc -d x"), 0) << out_;
    const Dataset m = Dataset::read(dir_.file("m.nc"));
    EXPECT_EQ(m.rows, 3u);
    EXPECT_EQ(m.cols, 8u);
    // Index files are still written when asked (numeric labels), and travel in the file.
    ASSERT_EQ(run("convert -i train.txt -o i.nc -d x -f features -s samples -c"), 0) << out_;
    EXPECT_TRUE(fs::exists(dir_.file("features")));
    EXPECT_TRUE(fs::exists(dir_.file("samples")));
    EXPECT_EQ(Dataset::read(dir_.file("i.nc")).feature_names,
              (std::vector<std::string>{"0", "1", "2", "3", "4", "5"}));
}

TEST_F(ConvertWithoutIndexFiles, BadInputIsNamed) {
    testing::write_file(dir_.file("train.txt"), "0 3 5\n2 x\n");
    EXPECT_EQ(run("convert --format user-items -i train.txt -o t.nc -d x"), 1);
    EXPECT_NE(out_.find("train.txt:2"), std::string::npos) << out_;
    testing::write_file(dir_.file("ok.txt"), "0 3 5\n");
    EXPECT_EQ(run("convert -i ok.txt -o t.nc -d x --width 4"), 1);
    EXPECT_NE(out_.find("option --width: 4 columns, but the input has feature id 5"),
              std::string::npos)
        << out_;
    EXPECT_EQ(run("convert -i ok.txt -o t.nc -d x --width 0"), 2);
    EXPECT_EQ(run("convert -i ok.txt -o t.nc -d x -c"), 2);
    EXPECT_NE(out_.find("-c needs a features index file (-f)"), std::string::npos) << out_;
    EXPECT_EQ(run("convert -i ok.txt -o t.nc -d x --ids first-seen"), 2);
    EXPECT_NE(out_.find("--ids first-seen"), std::string::npos) << out_;
    testing::write_file(dir_.file("names.txt"), "alice\tm1:m2\n");
    EXPECT_EQ(run("convert --format dsstne -i names.txt -o t.nc -d x"), 1);
    EXPECT_NE(out_.find("names.txt:1"), std::string::npos) << out_;
    EXPECT_FALSE(fs::exists(dir_.file("t.nc")));
}

}  // namespace
}  // namespace sparsenet

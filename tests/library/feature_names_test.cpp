// Issue 23: feature names travel from the dataset file into the model file, and a Recommender
// built from the model path alone resolves them; models and datasets without names load as
// before and say so when asked for names.
#include <gtest/gtest.h>

#include <netcdf.h>

#include "io/model_file.h"
#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

std::vector<std::string> movie_names(uint32_t n) {
    std::vector<std::string> names;
    for (uint32_t i = 0; i < n; ++i) names.push_back("movie " + std::to_string(i + 1));
    return names;
}

TEST(FeatureNames, DatasetFileKeepsItsFeaturesIndex) {
    testing::TempDir dir;
    Dataset d;
    d.name = "gl_input";
    d.rows = 2;
    d.cols = 4;
    d.offsets = {0, 1, 3};
    d.indices = {2, 0, 3};
    d.feature_names = {"a", "b", "c"};  // fewer than the columns is allowed
    Dataset plain = d;
    plain.name = "plain";
    plain.feature_names.clear();
    write_datasets(dir.file("d.nc"), {d, plain});
    EXPECT_EQ(Dataset::read(dir.file("d.nc"), "gl_input").feature_names, d.feature_names);
    EXPECT_TRUE(Dataset::read(dir.file("d.nc"), "plain").feature_names.empty());
    d.feature_names = {"line\nbreak"};
    try {
        write_datasets(dir.file("e.nc"), {d});
        FAIL() << "a name with a line break was written";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("line break"), std::string::npos) << e.what();
    }
}

TEST(FeatureNames, ModelFileCarriesThemAndTheRecommenderUsesThem) {
    testing::TempDir dir;
    Network net = testing::random_network(30, 8, 1);
    EXPECT_TRUE(net.feature_names("Input").empty());
    const std::string plain_path = dir.file("plain.nc");
    net.save(plain_path);
    std::vector<std::string> in = movie_names(30), out = movie_names(30);
    out[0] = "first output";
    net.set_feature_names("Input", in);
    net.set_feature_names("Output", out);
    const std::string named_path = dir.file("named.nc");
    net.save(named_path);

    const Network loaded = Network::load(named_path);
    EXPECT_EQ(loaded.feature_names("Input"), in);
    EXPECT_EQ(loaded.feature_names("Output"), out);
    EXPECT_TRUE(loaded.feature_names("Hidden").empty());
    const io::ModelFile file = io::read_model(named_path);
    EXPECT_EQ(file.feature_names.at("Input"), in);
    // A model without names (as every file written before them) loads, with none.
    EXPECT_TRUE(Network::load(plain_path).feature_names("Input").empty());
    EXPECT_TRUE(io::read_model(plain_path).feature_names.empty());

    // Queries by name with the model path alone; results named by the output layer's names.
    const Recommender named(named_path);
    EXPECT_TRUE(named.has_names());
    EXPECT_EQ(named.id_of("movie 5"), 4u);
    const Recommendations got = named.recommend({"movie 1", "movie 5"}, 7);
    ASSERT_EQ(got.items.size(), 7u);
    RecommendOptions seven;
    seven.k = 7;
    const Recommendations by_id = named.recommend({0, 4}, seven);
    for (size_t i = 0; i < got.items.size(); ++i) {
        EXPECT_EQ(got.items[i].id, by_id.items[i].id);
        EXPECT_EQ(got.items[i].name, out[got.items[i].id]);
    }
    try {
        named.recommend({"movie 1", "no such movie"}, 3);
        FAIL() << "an unknown name was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kData);
        EXPECT_NE(std::string(e.what()).find("'no such movie'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(named.recommend({"movie 1"}, 0), Error);
    EXPECT_THROW(named.recommend({"movie 1"}, -2), Error);

    // No names anywhere: said clearly.
    const Recommender plain(plain_path);
    EXPECT_FALSE(plain.has_names());
    try {
        plain.recommend({"50", "100"}, 10);
        FAIL() << "names were accepted by a model without names";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find(plain_path + " has no feature names"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(net.set_feature_names("Input", movie_names(31)), Error);
    EXPECT_THROW(net.set_feature_names("Nope", {"a"}), Error);
}

TEST(FeatureNames, MoreNamesThanUnitsInAFileIsAnError) {
    testing::TempDir dir;
    Network net = testing::random_network(30, 8, 1);
    io::ModelFile file;
    net.save(dir.file("m.nc"));
    file = io::read_model(dir.file("m.nc"));
    file.feature_names["Hidden"] = movie_names(9);  // Hidden has 8 units
    io::write_model(dir.file("bad.nc"), file);
    try {
        io::read_model(dir.file("bad.nc"));
        FAIL() << "9 names for 8 units were accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("layer1_featureNames"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace sparsenet

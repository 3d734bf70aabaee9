// ANN indexes with 16-bit vectors (AnnIndexOptions::vectors fp16 / bf16) and BF16 input weights
// (RecommenderOptions::bf16_input_weights): the 16-bit distances against a double-precision
// reference; answers equal to the exact answers of the model whose output weights are rounded
// the same way; the file's format (version 2 records the vectors' precision,
// version 1 files still load as FP32); the sparse input layer gathered from BF16 weights bit for
// bit as from FP32 weights rounded to BF16; --ann together with bf16_weights_only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "engine/ann_vectors.h"
#include "formulas/precision.h"
#include "library/ann_test_util.h"
#include "library/library_test_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using engine::AnnVectors;
using testing::recommender_config;
using testing::ann::expect_same;
using testing::ann::random_options;
using testing::ann::save_network;
using testing::ann::with_ann;

AnnVectors vectors_of(const std::string& name) {
    return engine::parse_ann_vectors(name);
}

// A copy of `model` whose parameters `names` hold their values rounded by `round`.
std::string rounded_copy(const std::string& model, const std::vector<std::string>& names,
                         float (*round)(float), const std::string& path) {
    NetworkOptions options;
    options.device = "cpu";
    Network net = Network::load(model, options);
    for (const std::string& name : names) {
        std::vector<float> v = net.get_parameter(name);
        for (float& x : v) x = round(x);
        net.set_parameter(name, v);
    }
    net.save(path);
    return path;
}
float round_fp16(float x) {
    return formulas::fp16_to_float(formulas::fp16_bits(x));
}
float round_bf16(float x) {
    return formulas::round_bf16(x);
}
// The output layer's weights rounded as an index with these vectors stores them (its biases stay
// FP32).
std::string rounded_output(const std::string& model, const std::string& vectors,
                           const std::string& path) {
    return rounded_copy(model, {"weight:Hidden->Output"},
                        vectors == "bf16" ? &round_bf16 : &round_fp16, path);
}

using Ann16Test = testing::ann::Fixture;

TEST(AnnVectors, DistancesMatchADoublePrecisionReference) {
    std::mt19937 rng(17);
    for (const char* name : {"fp16", "bf16"}) {
        const AnnVectors v = vectors_of(name);
        // Magnitudes fp16 holds (its subnormals included) and, for bf16, far beyond (whose squares
        // FP32 still holds).
        const std::vector<float> scales = v == AnnVectors::kFp16
                                              ? std::vector<float>{1e-6f, 1e-2f, 1.0f, 300.0f}
                                              : std::vector<float>{1e-15f, 1e-2f, 1.0f, 1e15f};
        for (size_t dims : {1, 7, 8, 15, 16, 17, 31, 33, 64, 258}) {
            for (float scale : scales) {
                std::normal_distribution<float> normal(0.0f, scale);
                std::vector<uint16_t> a(dims), b(dims);
                for (size_t i = 0; i < dims; ++i) {
                    a[i] = engine::encode16(v, normal(rng));
                    b[i] = engine::encode16(v, normal(rng));
                }
                double want = 0.0;
                for (size_t i = 0; i < dims; ++i) {
                    const double d =
                        double(engine::decode16(v, a[i])) - double(engine::decode16(v, b[i]));
                    want += d * d;
                }
                const float got = v == AnnVectors::kFp16
                                      ? engine::l2_fp16(a.data(), b.data(), dims)
                                      : engine::l2_bf16(a.data(), b.data(), dims);
                EXPECT_NEAR(got, want, 1e-5 * want)
                    << name << ", " << dims << " values of scale " << scale;
                EXPECT_EQ(v == AnnVectors::kFp16 ? engine::l2_fp16(a.data(), a.data(), dims)
                                                 : engine::l2_bf16(a.data(), a.data(), dims),
                          0.0f);
                // The bulk widening is the scalar one.
                std::vector<float> wide(dims);
                engine::decode16(v, a.data(), dims, wide.data());
                for (size_t i = 0; i < dims; ++i)
                    ASSERT_EQ(formulas::float_bits(wide[i]),
                              formulas::float_bits(engine::decode16(v, a[i])))
                        << name << " value " << i;
            }
        }
        // The encodings are precision.h's roundings.
        for (float x : {0.1f, -3.75f, 65504.0f, 1e-7f, 123.456f}) {
            EXPECT_EQ(engine::encode16(v, x),
                      v == AnnVectors::kFp16 ? formulas::fp16_bits(x) : formulas::bf16_bits(x));
        }
    }
    try {
        engine::parse_ann_vectors("fp8");
        FAIL() << "expected fp8 to be refused";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("--vectors 'fp8'"), std::string::npos) << e.what();
    }
}

// The FP32 distance (kinds ivf and flat search with it; hnsw through hnswlib's space) and the
// distance of each stored layout: the weights' part plus the FP32 bias and augmentation.
TEST(AnnVectors, Fp32AndStoredDistancesMatchADoublePrecisionReference) {
    std::mt19937 rng(23);
    for (size_t dims : {1, 7, 8, 15, 16, 17, 33, 258, 272}) {
        for (float scale : {1e-15f, 1e-2f, 1.0f, 1e15f}) {
            std::normal_distribution<float> normal(0.0f, scale);
            std::vector<float> a(dims), b(dims);
            for (size_t i = 0; i < dims; ++i) {
                a[i] = normal(rng);
                b[i] = normal(rng);
            }
            double want = 0.0;
            for (size_t i = 0; i < dims; ++i) want += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
            EXPECT_NEAR(engine::l2_fp32(a.data(), b.data(), dims), want, 1e-5 * want)
                << dims << " values of scale " << scale;
            EXPECT_EQ(engine::l2_fp32(a.data(), a.data(), dims), 0.0f);
        }
    }
    for (const char* name : {"fp32", "fp16", "bf16"}) {
        const AnnVectors v = vectors_of(name);
        for (uint32_t width : {1u, 7u, 24u, 256u}) {
            // Two items' vectors [w, b, augmentation] in the stored layout, and decoded.
            std::normal_distribution<float> normal(0.0f, 1.0f);
            const size_t bytes = engine::ann_vector_bytes(v, width);
            std::vector<char> x(2 * bytes, 0);
            for (int item = 0; item < 2; ++item) {
                char* p = x.data() + item * bytes;
                for (uint32_t q = 0; q < width; ++q) {
                    const float w = normal(rng);
                    if (v == AnnVectors::kFp32) {
                        std::memcpy(p + q * 4, &w, 4);
                    } else {
                        const uint16_t h = engine::encode16(v, w);
                        std::memcpy(p + q * 2, &h, 2);
                    }
                }
                const float tail[2] = {normal(rng), std::fabs(normal(rng))};
                const size_t at =
                    v == AnnVectors::kFp32 ? width * 4 : engine::ann_halves(width) * 2;
                std::memcpy(p + at, tail, sizeof tail);
            }
            std::vector<float> da(width + 2), db(width + 2);
            engine::decode_stored(x.data(), v, width, da.data());
            engine::decode_stored(x.data() + bytes, v, width, db.data());
            double want = 0.0;
            for (uint32_t q = 0; q < width + 2; ++q)
                want += (double(da[q]) - db[q]) * (double(da[q]) - db[q]);
            const engine::StoredDistance d = engine::stored_distance(v, width);
            EXPECT_NEAR(d.func(x.data(), x.data() + bytes, &d.param), want, 1e-5 * want)
                << name << ", width " << width;
        }
    }
}

TEST(AnnVectors, EveryBuildHasKindsIvfAndFlat) {
    EXPECT_TRUE(ann_index_available());
    EXPECT_TRUE(ann_index_available("ivf"));
    EXPECT_TRUE(ann_index_available("flat"));
    try {
        ann_index_available("lsh");
        FAIL() << "expected kind lsh to be refused";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage);
        EXPECT_NE(std::string(e.what()).find("expected one of ivf, hnsw, flat"), std::string::npos)
            << e.what();
    }
}

// The re-ranking reads the 16-bit vectors: a flat index answers exactly what the model with its
// output weights rounded the same way answers without an index.
TEST_F(Ann16Test, FlatIndexAnswersTheRoundedModelsExactAnswer) {
    for (const std::string vectors : {"fp16", "bf16"}) {
        for (const std::string activation : {"Sigmoid", "Linear"}) {
            SCOPED_TRACE(vectors + " " + activation);
            const uint32_t items = 600;
            const std::string model = save_network(recommender_config(activation, 20), items,
                                                   dir.file(activation + vectors + ".nc"));
            AnnIndexOptions build;
            build.kind = "flat";
            build.vectors = vectors;
            const std::string index = dir.file(activation + vectors + ".ann");
            const AnnIndexReport report = build_ann_index(model, index, build);
            EXPECT_EQ(report.vectors, vectors);
            // 20 weights in 2 bytes, the bias and the augmentation in 4.
            EXPECT_EQ(report.index_bytes, uint64_t(items) * (20 * 2 + 2 * 4));
            const Recommender exact(
                rounded_output(model, vectors, dir.file("r" + vectors + ".nc")));
            const Recommender ann(model, with_ann(index));
            testing::ann::expect_same_answers(ann, exact, items, 120, 25, 23);
        }
    }
}

// A graph over 16-bit vectors: each returned item's score is the rounded model's exact score,
// the filters hold, and no FP32 copy of the vectors is kept (half fp32's memory and less).
TEST_F(Ann16Test, GraphAnswersScoreTheRoundedWeightsAndHalveTheMemory) {
    const uint32_t items = 2500;
    const std::string model =
        save_network(recommender_config("Sigmoid", 32), items, dir.file("g.nc"));
    std::map<std::string, size_t> memory;
    for (const std::string vectors : {"fp32", "fp16", "bf16"}) {
        SCOPED_TRACE(vectors);
        AnnIndexOptions build;
        build.kind = "hnsw";
        build.vectors = vectors;
        build.probe = 64;
        const std::string index = dir.file(vectors + ".ann");
        build_ann_index(model, index, build);
        const Recommender ann(model, with_ann(index));
        memory[vectors] = ann.ann_memory_bytes();
        const Recommender exact(
            vectors == "fp32" ? model : rounded_output(model, vectors, dir.file(vectors + "r.nc")));
        std::mt19937 rng(3);
        double found = 0.0;
        for (uint32_t i = 0; i < 60; ++i) {
            const std::vector<ItemRef> q = testing::random_items(rng, items, 30, false);
            const RecommendOptions o = random_options(rng, items, i);
            RecommendOptions all = o;
            all.k = items;
            std::map<uint32_t, float> allowed;
            for (const Recommendation& r : exact.recommend(q, all).items) allowed[r.id] = r.score;
            const Recommendations got = ann.recommend(q, o);
            ASSERT_EQ(got.items.size(), std::min<size_t>(o.k, allowed.size())) << "query " << i;
            for (const Recommendation& r : got.items) {
                auto it = allowed.find(r.id);
                ASSERT_NE(it, allowed.end()) << "query " << i << ": item " << r.id << " excluded";
                EXPECT_EQ(r.score, it->second) << "query " << i << " item " << r.id;
            }
            const Recommendations want = exact.recommend(q, o);
            size_t common = 0;
            for (const Recommendation& w : want.items)
                for (const Recommendation& r : got.items) common += r.id == w.id;
            found += want.items.empty() ? 1.0 : double(common) / double(want.items.size());
        }
        EXPECT_GT(found / 60, 0.8) << "recall against the rounded model's exact answers";
    }
    // 16-bit vectors: 32 weights x 2 bytes and 2 x 4 against 48 x 4 (padded to 16s) per item.
    EXPECT_LT(memory["fp16"] + size_t(items) * (48 * 4 - 32 * 2 - 2 * 4),
              memory["fp32"] + items * 8);
    // The same but for the upper levels' links (which items reach them depends on the order of
    // the parallel build's insertions).
    EXPECT_NEAR(double(memory["fp16"]), double(memory["bf16"]), 0.02 * double(memory["fp16"]));
}

// The header of an index file: the offsets of its version and of its vectors field (version 2).
struct Header {
    size_t version_at = 16, vectors_at = 0, vectors_size = 0;
};
Header header_of(const std::string& bytes) {
    Header h;
    size_t at = 20;
    auto str = [&]() {
        uint32_t n;
        std::memcpy(&n, bytes.data() + at, 4);
        at += 4 + n;
    };
    str();                            // kind
    str();                            // layer
    str();                            // model path
    at += 8 + 4 + 4 + 8 + 4 + 4 + 4;  // items, width, dims, fingerprint, radius, links, probe
    h.vectors_at = at;
    uint32_t n;
    std::memcpy(&n, bytes.data() + at, 4);
    h.vectors_size = 4 + n;
    return h;
}

TEST_F(Ann16Test, FilesRecordTheirVectorsAndVersionOneFilesLoadAsFp32) {
    const uint32_t items = 400;
    const std::string model =
        save_network(recommender_config("Sigmoid", 12), items, dir.file("f.nc"));
    const std::string other =
        save_network(recommender_config("Sigmoid", 12), items, dir.file("o.nc"), 8);
    AnnIndexOptions build;
    build.kind = "hnsw";  // written as version 2 (ivf files are version 3: ann_ivf_test)
    build.probe = 50;
    for (const std::string vectors : {"fp32", "fp16"}) {
        build.vectors = vectors;
        build_ann_index(model, dir.file(vectors + ".ann"), build);
        const std::string bytes = testing::read_file(dir.file(vectors + ".ann"));
        uint32_t version;
        std::memcpy(&version, bytes.data() + 16, 4);
        EXPECT_EQ(version, 2u);
        const Header h = header_of(bytes);
        EXPECT_EQ(bytes.substr(h.vectors_at + 4, h.vectors_size - 4), vectors);
        // The same file in version 1's layout: no vectors field.
        std::string v1 =
            bytes.substr(0, h.vectors_at) + bytes.substr(h.vectors_at + h.vectors_size);
        const uint32_t one = 1;
        std::memcpy(v1.data() + 16, &one, 4);
        testing::write_file(dir.file(vectors + "-v1.ann"), v1);
        // Another precision than the graph's: refused as corrupt, naming the file.
        std::string wrong = bytes;
        std::memcpy(wrong.data() + h.vectors_at + 4, vectors == "fp32" ? "bf16" : "fp32", 4);
        testing::write_file(dir.file(vectors + "-wrong.ann"), wrong);
        std::string unknown = bytes;
        std::memcpy(unknown.data() + h.vectors_at + 4, "fp08", 4);
        testing::write_file(dir.file(vectors + "-unknown.ann"), unknown);
        std::string future = bytes;
        const uint32_t four = 4;
        std::memcpy(future.data() + 16, &four, 4);
        testing::write_file(dir.file(vectors + "-v4.ann"), future);
    }
    // A version 1 file (FP32, the format before 16-bit vectors) answers as its version 2 twin.
    const Recommender v2(model, with_ann(dir.file("fp32.ann")));
    const Recommender v1(model, with_ann(dir.file("fp32-v1.ann")));
    std::mt19937 rng(2);
    for (uint32_t i = 0; i < 40; ++i) {
        const std::vector<ItemRef> q = testing::random_items(rng, items, 20, false);
        RecommendOptions o;
        o.k = 20;
        expect_same(v1.recommend(q, o), v2.recommend(q, o), i);
    }
    EXPECT_EQ(v1.ann_memory_bytes(), v2.ann_memory_bytes());
    auto refused = [&](const std::string& model_path, const std::string& file, ErrorCategory cat,
                       const std::string& fragment) {
        try {
            Recommender r(model_path, with_ann(file));
            ADD_FAILURE() << "expected " << file << " to be refused";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), cat) << e.what();
            const std::string m = e.what();
            EXPECT_NE(m.find(file), std::string::npos) << m;
            EXPECT_NE(m.find(fragment), std::string::npos) << m;
        }
    };
    // Version 1 with a 16-bit graph cannot be: its dimensions are not FP32's.
    refused(model, dir.file("fp16-v1.ann"), ErrorCategory::kIo, "corrupt ANN index");
    refused(model, dir.file("fp16-wrong.ann"), ErrorCategory::kIo, "corrupt ANN index");
    refused(model, dir.file("fp32-wrong.ann"), ErrorCategory::kIo, "corrupt ANN index");
    refused(model, dir.file("fp16-unknown.ann"), ErrorCategory::kIo, "vector precision 'fp08'");
    refused(model, dir.file("fp16-v4.ann"), ErrorCategory::kIo, "format version 4");
    refused(other, dir.file("fp16.ann"), ErrorCategory::kData, "built from another model");
    AnnIndexOptions bad;
    bad.vectors = "fp64";
    try {
        build_ann_index(dir.file("missing.nc"), dir.file("x.ann"), bad);
        FAIL() << "expected --vectors fp64 to be refused";
    } catch (const Error& e) {
        // Before the model is read: the option's error, not the missing file's.
        EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
        EXPECT_NE(std::string(e.what()).find("--vectors 'fp64'"), std::string::npos) << e.what();
    }
}

// The sparse input layer in BF16: bit for bit the model whose input weights are rounded to BF16,
// on the exact path, the fp16 screen and an ANN index alike.
TEST_F(Ann16Test, Bf16InputWeightsAnswerAsTheModelWithRoundedInputWeights) {
    const uint32_t items = 500;
    const std::string model =
        save_network(recommender_config("Sigmoid", 24), items, dir.file("m.nc"));
    const std::string rounded =
        rounded_copy(model, {"weight:Input->Hidden"}, &round_bf16, dir.file("mb.nc"));
    AnnIndexOptions build;
    build.kind = "flat";
    build.vectors = "fp32";
    // The index records the output layer only: one index serves both files.
    build_ann_index(model, dir.file("m.ann"), build);
    for (int path = 0; path < 3; ++path) {
        SCOPED_TRACE(path == 0 ? "exact" : path == 1 ? "fp16 screen" : "ANN index");
        RecommenderOptions o = path == 2 ? with_ann(dir.file("m.ann")) : RecommenderOptions{};
        o.fp16_screening = path == 1;
        const Recommender want(rounded, o);
        o.bf16_input_weights = true;
        const Recommender got(model, o);
        // [items, 24] FP32 weights freed, a BF16 copy kept (and the output matrix with an index).
        EXPECT_GE(got.released_bytes() - want.released_bytes(), size_t(items) * 24 * 2);
        std::mt19937 rng(31);
        for (uint32_t i = 0; i < 80; ++i) {
            const std::vector<ItemRef> q = testing::random_items(rng, items, 30, i % 2 == 0);
            const RecommendOptions ro = random_options(rng, items, i);
            expect_same(got.recommend(q, ro), want.recommend(q, ro), i);
        }
    }
    // Tied weights: the input matrix is also the output layer's GEMM operand: nothing qualifies.
    const std::string tied =
        save_network(recommender_config("Relu", 8, true), 100, dir.file("t.nc"));
    RecommenderOptions o;
    o.bf16_input_weights = true;
    try {
        Recommender r(tied, o);
        FAIL() << "expected bf16_input_weights to be refused for tied weights";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
        EXPECT_NE(std::string(e.what()).find("bf16_input_weights"), std::string::npos) << e.what();
    }
}

// --ann with bf16_weights_only (refused before 16-bit vectors): the candidates are re-ranked in
// the network's bf16 arithmetic, so a flat index of bf16 vectors answers what the bf16 model
// answers without an index (its GEMM reads the weights rounded to BF16, as the index stores
// them, and adds the FP32 biases).
TEST_F(Ann16Test, AnnWithBf16WeightsOnlyAnswersAsTheBf16Model) {
    const uint32_t items = 500;
    const std::string model =
        save_network(recommender_config("Sigmoid", 24), items, dir.file("b.nc"));
    AnnIndexOptions build;
    build.kind = "flat";
    build.vectors = "bf16";
    build_ann_index(model, dir.file("b.ann"), build);
    RecommenderOptions bf16;
    bf16.precision = Precision::kBf16;
    const Recommender want(model, bf16);
    RecommenderOptions o = with_ann(dir.file("b.ann"));
    o.precision = Precision::kBf16;
    o.bf16_weights_only = true;
    const Recommender got(model, o);
    o.bf16_input_weights = true;
    const Recommender smallest(model, o);  // all three together load and answer
    std::mt19937 rng(37);
    for (uint32_t i = 0; i < 80; ++i) {
        const std::vector<ItemRef> q = testing::random_items(rng, items, 30, false);
        const RecommendOptions ro = random_options(rng, items, i);
        expect_same(got.recommend(q, ro), want.recommend(q, ro), i);
        EXPECT_EQ(smallest.recommend(q, ro).items.size(), want.recommend(q, ro).items.size());
    }
}

}  // namespace
}  // namespace sparsenet

// Predictor::top_k's exclusion: the row's own inputs are read from their upload for the forward
// pass (not uploaded again), with the same result as an equal dataset uploaded on its own; and
// PredictOptions::timings adds up both phases.
#include <gtest/gtest.h>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

TEST(PredictorExclusion, InputsAsTheExclusionGiveWhatAnEqualCopyGives) {
    const Dataset in =
        testing::random_dataset(300, 80, testing::RowShape::kPowerLaw, false, 3, "in");
    NetworkOptions options;
    options.device = "cpu";
    options.seed = 5;
    Network net = Network::create(NetworkConfig::from_json(testing::sparse_autoencoder_json(16)),
                                  {{"in", in.cols}, {"out", in.cols}}, options);
    Predictor predictor(net, {{"in", &in}});
    PredictOptions po;
    po.k = 20;
    po.batch = 64;
    PredictTimings timings;
    po.timings = &timings;
    const TopK own = predictor.top_k(po, &in);  // the upload of the input itself
    EXPECT_GT(timings.score, 0.0);
    EXPECT_GT(timings.top_k, 0.0);
    po.timings = nullptr;
    const Dataset copy = in;  // another dataset: uploaded for the exclusion
    const TopK separate = predictor.top_k(po, &copy);
    EXPECT_EQ(own.indices, separate.indices);
    EXPECT_EQ(own.scores, separate.scores);
    // Every row's own items are excluded, and excluding nothing brings some back.
    const TopK none = predictor.top_k(po, nullptr);
    bool returned = false;
    for (uint64_t r = 0; r < in.rows; ++r) {
        for (uint64_t e = in.offsets[r]; e < in.offsets[r + 1]; ++e) {
            for (uint32_t i = 0; i < po.k; ++i) {
                EXPECT_NE(own.indices[r * po.k + i], in.indices[e]) << "row " << r;
                returned = returned || none.indices[r * po.k + i] == in.indices[e];
            }
        }
    }
    EXPECT_TRUE(returned);
}

}  // namespace
}  // namespace sparsenet

// Model parallelism under mpirun (-np 1, 2, 3): a network split over every rank of the job
// ("mpi" communicator) against the same network on one process ("local", computed on every
// rank), same seeds. Layer widths are odd so that bands are uneven. Tolerances: the split adds
// partial sums in another order (reduce-scatter), so results agree to float rounding, not bits
// (docs/parallelism.md).
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "engine/network_impl.h"
#include "io/model_file.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"
#include "support/split_networks.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using mpi_testing::Data;
using mpi_testing::kDeep;
using mpi_testing::kSoftmax;
using mpi_testing::world_rank;
using mpi_testing::world_size;

// Sparse autoencoder as DSSTNE's samples (denoising, dropout, sigmoid output, SMCE): the shared
// one (tests/data/configs) with 37 hidden units, so that 2 and 3 ranks hold unequal bands.
// (A function, not a global: the parser's tables may not exist yet at static initialisation.)
std::string autoencoder() {
    return testing::sparse_autoencoder_json(37);
}

NetworkOptions on(const std::string& comm, const std::string& parallel = "model") {
    NetworkOptions o;
    o.device = "cpu";
    o.threads = 1;
    o.comm = parse_comm_kind(comm);
    o.parallel = parse_parallel_mode(parallel);
    return o;
}

TrainOptions adam(uint32_t epochs, OptimizerKind kind = OptimizerKind::kAdam,
                  float learning_rate = 0.003f) {
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 50;
    t.seed = 7;
    t.optimizer.kind = kind;
    t.optimizer.learning_rate = learning_rate;
    return t;
}

double relative(double a, double b) {
    return std::abs(a - b) / std::max(1e-12, std::max(std::abs(a), std::abs(b)));
}

// Trains the config split ("mpi") and whole ("local"); per-epoch losses, every parameter, the
// scores and the top-K agree. after_training (optional): more checks of the split network.
void expect_split_matches_whole(const std::string& json, const Data& d, uint32_t epochs,
                                OptimizerKind kind, double param_tol, float learning_rate = 0.003f,
                                const std::function<void(Network&)>& after_training = nullptr) {
    const NetworkConfig config = NetworkConfig::from_json(json);
    Network split = Network::create(config, d.widths(), on("mpi"));
    Network whole = Network::create(config, d.widths(), on("local"));
    ASSERT_EQ(split.ranks(), world_size());
    ASSERT_EQ(whole.ranks(), 1);
    // The same initial weights whatever the rank count (each rank draws only its block).
    for (const Parameter& p : whole.parameters()) {
        ASSERT_EQ(split.get_parameter(p.name), whole.get_parameter(p.name)) << p.name;
    }
    Trainer split_trainer(split, d.all(), adam(epochs, kind, learning_rate));
    Trainer whole_trainer(whole, d.all(), adam(epochs, kind, learning_rate));
    const auto a = split_trainer.fit();
    const auto b = whole_trainer.fit();
    ASSERT_EQ(a.size(), b.size());
    for (size_t e = 0; e < a.size(); ++e) {
        EXPECT_LT(relative(a[e].loss, b[e].loss), 1e-5)
            << "epoch " << e + 1 << ": " << a[e].loss << " vs " << b[e].loss;
    }
    EXPECT_LT(a.back().loss, a.front().loss);  // it learned
    if (after_training) after_training(split);
    for (const Parameter& p : whole.parameters()) {
        const std::vector<float> x = split.get_parameter(p.name);
        const std::vector<float> y = whole.get_parameter(p.name);
        ASSERT_EQ(x.size(), y.size());
        double worst = 0.0;
        for (size_t i = 0; i < x.size(); ++i)
            worst = std::max(worst, double(std::abs(x[i] - y[i])));
        EXPECT_LT(worst, param_tol) << p.name;
    }
    Predictor ps(split, {{"in", &d.in}});
    Predictor pw(whole, {{"in", &d.in}});
    const std::vector<float> sa = ps.scores(0, 40);
    const std::vector<float> sb = pw.scores(0, 40);
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); ++i) EXPECT_NEAR(sa[i], sb[i], 1e-4) << i;
    PredictOptions po;
    po.k = 10;
    const TopK ta = ps.top_k(po, &d.in);
    const TopK tb = pw.top_k(po, &d.in);
    ASSERT_EQ(ta.indices.size(), tb.indices.size());
    size_t same = 0;
    for (size_t i = 0; i < ta.indices.size(); ++i) {
        same += ta.indices[i] == tb.indices[i];
        EXPECT_NEAR(ta.scores[i], tb.scores[i], 1e-4);
    }
    // Near-ties may swap places at float rounding; almost every slot agrees.
    EXPECT_GE(double(same), 0.99 * double(ta.indices.size()));
}

TEST(ModelParallel, SparseAutoencoderMatchesOneRank) {
    Data d(300, 101, 4000);
    expect_split_matches_whole(autoencoder(), d, 3, OptimizerKind::kAdam, 1e-4);
}

// Exact Momentum on the row clock (each rank catches up its band of the input rows in closed
// form, docs/config-reference.md "Sparse updates") as on one rank.
TEST(ModelParallel, MomentumCatchUpMatchesOneRank) {
    Data d(300, 101, 4000);
    expect_split_matches_whole(autoencoder(), d, 3, OptimizerKind::kMomentum, 1e-4);
}

TEST(ModelParallel, SoftmaxMultinomialMatchesOneRank) {
    Data d(300, 103, 4000);
    expect_split_matches_whole(kSoftmax, d, 3, OptimizerKind::kAdamW, 1e-4);
}

TEST(ModelParallel, DeepNetworkMatchesOneRank) {
    Data d(240, 97, 3000);
    expect_split_matches_whole(kDeep, d, 3, OptimizerKind::kAdam, 1e-4);
}

// SGD and Momentum take their step inside the weight-gradient GEMM on split matrices too
// (Network::Impl::fused_update): in the deep network Hidden3 -> Hidden4 is split by input rows
// (its GEMM reads the layer's gathered delta, kept until update()), Hidden4 -> Output by output
// columns (forward's gathered activations), the sparse input runs its sparse_step on its band of
// rows (the gathered delta again), and Hidden1 -> Hidden2's WeightNorm keeps the step apart. As
// on one rank, and no matrix whose step is fused holds a dense gradient; the SoftMax network's
// output delta is written over its split activations.
TEST(ModelParallel, FusedStepsOnSplitMatricesMatchOneRank) {
    const auto no_dense_gradient_where_fused = [](OptimizerKind kind) {
        return [kind](Network& split) {
            const Network::Impl& impl = split.impl();
            formulas::OptimizerStep step;
            step.kind = kind;
            size_t fused = 0;
            for (size_t wi = 0; wi < impl.graph.edges.size(); ++wi) {
                if (impl.graph.edges[wi].owner != int(wi)) continue;
                const bool dense = impl.plan.edges[wi].dense_grad;
                if (dense && impl.update_fusable(int(wi), step)) {
                    ++fused;
                    EXPECT_EQ(impl.buffers.edges[wi].grad.size(), 0u) << "edge " << wi;
                }
                if (world_size() > 1 && impl.plan.edges[wi].split == engine::Split::kNone) {
                    ADD_FAILURE() << "edge " << wi << " is not split";
                }
            }
            EXPECT_GE(fused, 1u);
        };
    };
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum}) {
        SCOPED_TRACE(to_string(kind));
        const float lr = kind == OptimizerKind::kSgd ? 0.5f : 0.1f;
        Data deep(240, 97, 3000);
        expect_split_matches_whole(kDeep, deep, 3, kind, 1e-4, lr,
                                   no_dense_gradient_where_fused(kind));
        Data softmax(300, 103, 4000);
        expect_split_matches_whole(kSoftmax, softmax, 3, kind, 1e-4, lr, [&](Network& split) {
            const Network::Impl& impl = split.impl();
            EXPECT_TRUE(impl.plan.layers.back().delta_over_act);
            EXPECT_EQ(impl.buffers.layers.back().delta.size(), 0u);
            no_dense_gradient_where_fused(kind)(split);
        });
    }
}

TEST(ModelParallel, GradientsOfEveryParameterMatchOneRank) {
    Data d(120, 53, 1200);
    const NetworkConfig config = NetworkConfig::from_json(kDeep);
    Network split = Network::create(config, d.widths(), on("mpi"));
    Network whole = Network::create(config, d.widths(), on("local"));
    Trainer ts(split, d.all(), adam(1));
    Trainer tw(whole, d.all(), adam(1));
    EXPECT_LT(relative(ts.compute_loss(5, 30), tw.compute_loss(5, 30)), 1e-6);
    const auto gs = ts.compute_gradients(5, 30);
    const auto gw = tw.compute_gradients(5, 30);
    ASSERT_EQ(gs.size(), gw.size());
    for (const auto& kv : gw) {
        const std::vector<float>& x = gs.at(kv.first);
        ASSERT_EQ(x.size(), kv.second.size()) << kv.first;
        float scale = 0.0f;
        for (float v : kv.second) scale = std::max(scale, std::abs(v));
        EXPECT_GT(scale, 0.0f) << kv.first << ": no gradient, nothing compared";
        for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_NEAR(x[i], kv.second[i], 1e-5f * std::max(1.0f, scale))
                << kv.first << "[" << i << "]";
        }
    }
}

TEST(ModelParallel, FiniteDifferenceGradientsOfASplitNetwork) {
    // The split network's own gradients against its own loss (every rank perturbs the same
    // weight in step: get/set_parameter are collective).
    Data d(40, 17, 300);
    const NetworkConfig config = NetworkConfig::from_json(kSoftmax);
    Network split = Network::create(config, d.widths(), on("mpi"));
    TrainOptions t = adam(1);
    Trainer trainer(split, d.all(), t);
    double largest = 0.0;
    const int checked = testing::check_gradients_numerically(split, trainer, 3, 8, 1e-2f, &largest);
    EXPECT_GT(checked, 100);
    EXPECT_GT(largest, 1e-3);
}

TEST(ModelParallel, SavedSplitModelLoadsOnOneRankWithTheSameScores) {
    Data d(200, 89, 2500);
    const NetworkConfig config = NetworkConfig::from_json(autoencoder());
    Network split = Network::create(config, d.widths(), on("mpi"));
    Trainer trainer(split, d.all(), adam(2));
    trainer.fit();
    // One path for every rank: rank 0's temporary directory.
    std::unique_ptr<testing::TempDir> dir;
    char path[4096] = {0};
    if (world_rank() == 0) {
        dir = std::make_unique<testing::TempDir>();
        std::snprintf(path, sizeof path, "%s", dir->file("split.nc").c_str());
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    split.save(path);
    // Every rank reads the file rank 0 wrote; loaded whole, it holds the split weights.
    Network whole = Network::load(path, on("local"));
    for (const Parameter& p : whole.parameters()) {
        EXPECT_EQ(whole.get_parameter(p.name), split.get_parameter(p.name)) << p.name;
    }
    Network again = Network::load(path, on("mpi"));  // and it loads split again
    Predictor pw(whole, {{"in", &d.in}});
    Predictor ps(again, {{"in", &d.in}});
    const std::vector<float> a = pw.scores(0, 50);
    const std::vector<float> b = ps.scores(0, 50);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
    MPI_Barrier(MPI_COMM_WORLD);  // nobody reads the file once rank 0 removes it
}

// Checkpoints of a split (or data-parallel) network: a cancel on rank 0 alone stops every rank
// at the same batch (the ranks agree after each batch), the checkpoint written there resumes
// on the same ranks to the uninterrupted run's weights bit for bit, and on one process to
// within the split's tolerance. Timed checkpoints after every batch keep the ranks in step.
void expect_checkpoint_resumes(const std::string& parallel) {
    Data d(200, 89, 2500);
    const NetworkConfig config = NetworkConfig::from_json(autoencoder());
    std::unique_ptr<testing::TempDir> dir;
    char path[4096] = {0};
    if (world_rank() == 0) {
        dir = std::make_unique<testing::TempDir>();
        std::snprintf(path, sizeof path, "%s", dir->file("ck").c_str());
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

    Network straight = Network::create(config, d.widths(), on("mpi", parallel));
    Trainer(straight, d.all(), adam(3)).fit();

    Network first = Network::create(config, d.widths(), on("mpi", parallel));
    TrainOptions t = adam(3);
    Trainer* self = nullptr;
    t.on_batch = [&](const BatchProgress& p) {
        if (world_rank() == 0 && p.epoch == 2 && p.batch == 2) self->cancel();
    };
    Trainer a(first, d.all(), t);
    self = &a;
    const auto ran = a.fit();
    ASSERT_EQ(ran.size(), 2u);
    EXPECT_FALSE(ran.back().complete);
    EXPECT_EQ(ran.back().batches, 2u) << "rank " << world_rank();
    a.save_checkpoint(path);

    Network resumed = Network::load(path, on("mpi", parallel));
    Trainer b(resumed, d.all(), adam(3));
    b.resume(path);
    b.fit();
    for (const Parameter& p : straight.parameters()) {
        EXPECT_EQ(resumed.get_parameter(p.name), straight.get_parameter(p.name)) << p.name;
    }
    Network alone = Network::load(path, on("local"));
    Trainer c(alone, d.all(), adam(3));
    c.resume(path);
    c.fit();
    for (const Parameter& p : straight.parameters()) {
        const std::vector<float> x = alone.get_parameter(p.name);
        const std::vector<float> y = straight.get_parameter(p.name);
        double worst = 0.0;
        for (size_t i = 0; i < x.size(); ++i)
            worst = std::max(worst, double(std::abs(x[i] - y[i])));
        EXPECT_LT(worst, 1e-4) << p.name;
    }

    Network timed = Network::create(config, d.widths(), on("mpi", parallel));
    TrainOptions tt = adam(1);
    tt.checkpoint = path;
    tt.checkpoint_seconds = 1e-9;
    int written = 0;
    tt.on_checkpoint = [&](const CheckpointInfo&) { ++written; };
    Trainer(timed, d.all(), tt).fit();
    EXPECT_EQ(written, 4);        // 200 rows, batches of 50
    MPI_Barrier(MPI_COMM_WORLD);  // nobody reads the file once rank 0 removes it
}

// One path for every rank: rank 0's temporary directory (kept alive by *dir on rank 0).
std::string shared_dir(std::unique_ptr<testing::TempDir>* dir) {
    char path[4096] = {0};
    if (world_rank() == 0) {
        *dir = std::make_unique<testing::TempDir>();
        std::snprintf(path, sizeof path, "%s", (*dir)->path().c_str());
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    return path;
}

void expect_same_values(const io::ModelFile& a, const io::ModelFile& b, const std::string& what) {
    EXPECT_EQ(a.config.to_json(), b.config.to_json()) << what;
    ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
    for (size_t i = 0; i < a.weights.size(); ++i) {
        EXPECT_EQ(a.weights[i].values, b.weights[i].values) << what << ": weight" << i;
        EXPECT_EQ(a.weights[i].state1, b.weights[i].state1) << what << ": weight" << i;
        EXPECT_EQ(a.weights[i].state2, b.weights[i].state2) << what << ": weight" << i;
    }
    ASSERT_EQ(a.biases.size(), b.biases.size()) << what;
    for (size_t i = 0; i < a.biases.size(); ++i) {
        EXPECT_EQ(a.biases[i].values, b.biases[i].values) << what << ": bias" << i;
        EXPECT_EQ(a.biases[i].state1, b.biases[i].state1) << what << ": bias" << i;
        EXPECT_EQ(a.biases[i].state2, b.biases[i].state2) << what << ": bias" << i;
    }
}

// The smallest matrix of the network, in floats.
size_t smallest_matrix(const Network& net) {
    size_t smallest = SIZE_MAX;
    for (const Parameter& p : net.parameters()) {
        if (p.name.rfind("weight:", 0) == 0) smallest = std::min<size_t>(smallest, p.rows * p.cols);
    }
    return smallest;
}

// A split save streams every matrix to rank 0 chunk by chunk (both splits, uneven bands): the file
// holds exactly the values one process writes, whatever the chunk size, and with chunks of a few
// floats rank 0's buffers for it stay below the smallest matrix. A checkpoint written in small
// chunks equals the default one and, read back block by block in small chunks, resumes to the
// same weights and optimizer state.
TEST(ModelParallel, StreamedSaveEqualsTheOneRankFile) {
    Data d(150, 83, 2000);
    const NetworkConfig config = NetworkConfig::from_json(kDeep);
    Network split = Network::create(config, d.widths(), on("mpi"));
    Trainer trainer(split, d.all(), adam(1));
    trainer.fit();
    Network whole = Network::create(config, d.widths(), on("local"));
    for (const Parameter& p : whole.parameters()) {
        whole.set_parameter(p.name, split.get_parameter(p.name));
    }
    std::unique_ptr<testing::TempDir> dir;
    const std::string root = shared_dir(&dir);
    if (world_rank() == 0) whole.save(root + "/one.nc");
    split.save(root + "/split.nc");
    split.impl().file_chunk_floats = 5;  // a row (or a few) of every band per gather
    split.impl().file_chunk_peak = 0;
    split.save(root + "/chunks.nc");
    if (world_rank() == 0) {
        EXPECT_LT(split.impl().file_chunk_peak, smallest_matrix(split));
    }
    MPI_Barrier(MPI_COMM_WORLD);  // rank 0 wrote one.nc
    const io::ModelFile one = io::read_model(root + "/one.nc");
    expect_same_values(io::read_model(root + "/split.nc"), one, "default chunks");
    expect_same_values(io::read_model(root + "/chunks.nc"), one, "small chunks");

    split.impl().file_chunk_floats = size_t(1) << 24;
    trainer.save_checkpoint(root + "/ck.nc");
    split.impl().file_chunk_floats = 5;
    trainer.save_checkpoint(root + "/ck_chunks.nc");
    expect_same_values(io::read_model(root + "/ck_chunks.nc", true),
                       io::read_model(root + "/ck.nc", true), "checkpoint");
    Network resumed = Network::load(root + "/ck_chunks.nc", on("mpi"));
    Trainer again(resumed, d.all(), adam(1));
    resumed.impl().file_chunk_floats = 5;
    resumed.impl().file_chunk_peak = 0;
    again.resume(root + "/ck_chunks.nc");
    EXPECT_LT(resumed.impl().file_chunk_peak, smallest_matrix(resumed));
    for (const Parameter& p : split.parameters()) {
        EXPECT_EQ(resumed.get_parameter(p.name), split.get_parameter(p.name)) << p.name;
    }
    const auto& a = split.impl().params.edges;
    const auto& b = resumed.impl().params.edges;
    for (size_t i = 0; i < a.size(); ++i) {  // this rank's blocks of the optimizer state
        for (const auto slot : {&engine::EdgeParams::state1, &engine::EdgeParams::state2}) {
            std::vector<float> x((a[i].*slot).size()), y((b[i].*slot).size());
            ASSERT_EQ(x.size(), y.size()) << "weight" << i;
            (a[i].*slot).download(x.data(), x.size());
            (b[i].*slot).download(y.data(), y.size());
            EXPECT_EQ(x, y) << "weight" << i;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);  // nobody reads the files once rank 0 removes them
}

// An infinity in one rank's block stops every rank's checkpoint with the same message, before any
// file is opened; a save that fails on rank 0 part-way through the stream (a file size limit there)
// fails on every rank without leaving one waiting, and leaves the previous file and no temporary.
TEST(ModelParallel, FailedSavesFailOnEveryRankAndKeepThePreviousFile) {
    Data d(150, 1000, 3000);
    const NetworkConfig config = NetworkConfig::from_json(kDeep);
    Network split = Network::create(config, d.widths(), on("mpi"));
    Trainer trainer(split, d.all(), adam(1));
    trainer.fit();
    std::unique_ptr<testing::TempDir> dir;
    const std::string root = shared_dir(&dir);
    const std::string path = root + "/model.nc";
    split.save(path);
    const std::string before = world_rank() == 0 ? testing::read_file(path) : "";

    std::vector<float> w = split.get_parameter("weight:Hidden4->Output");
    const std::vector<float> good = w;
    w.back() = std::numeric_limits<float>::infinity();  // the last rank's band
    split.set_parameter("weight:Hidden4->Output", w);
    const std::string message = testing::expect_error(
        [&] { trainer.save_checkpoint(root + "/ck.nc"); }, ErrorCategory::kNumeric);
    const std::string expected = "not writing the checkpoint " + root + "/ck.nc: 1 values of " +
                                 "weight:Hidden4->Output are NaN or infinite";
    EXPECT_TRUE(testing::contains(message, expected)) << message;
    EXPECT_FALSE(std::filesystem::exists(root + "/ck.nc"));
    split.set_parameter("weight:Hidden4->Output", good);

    // Rank 0 may write 48 KiB: the header and part of the first matrix (1000 x 23 floats); the
    // others cannot tell. (HDF5's exit handler, which would crash on the file whose close failed,
    // is off: mpi_test_main.cpp.)
    split.impl().file_chunk_floats = 5;
    rlimit saved{};
    getrlimit(RLIMIT_FSIZE, &saved);
    auto old_handler = signal(SIGXFSZ, SIG_IGN);
    if (world_rank() == 0) {
        const rlimit small{48 * 1024, saved.rlim_max};
        EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    }
    const std::string failed = testing::expect_error([&] { split.save(path); }, ErrorCategory::kIo);
    if (world_rank() == 0) {
        setrlimit(RLIMIT_FSIZE, &saved);
        EXPECT_TRUE(testing::contains(failed, "cannot save the model to " + path)) << failed;
        EXPECT_EQ(testing::read_file(path), before);
        size_t files = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(root)) ++files;
        EXPECT_EQ(files, 1u) << "a temporary file was left";
    } else {
        EXPECT_EQ(failed, path + ": rank 0 failed to write it");
    }
    signal(SIGXFSZ, old_handler);
    split.save(path);  // and the ranks are still in step
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(ModelParallel, CheckpointResumesExactly) {
    expect_checkpoint_resumes("model");
}

TEST(DataParallel, CheckpointResumesExactly) {
    expect_checkpoint_resumes("data");
}

// Data parallelism: whole weights on every rank, each rank its share of every batch, gradients
// summed. Same losses and weights as one process, and bit-identical weights on every rank.
TEST(DataParallel, AutoencoderMatchesOneRankAndRanksStayIdentical) {
    Data d(300, 101, 4000);
    const NetworkConfig config = NetworkConfig::from_json(autoencoder());
    Network data = Network::create(config, d.widths(), on("mpi", "data"));
    Network whole = Network::create(config, d.widths(), on("local"));
    ASSERT_EQ(data.ranks(), world_size());
    EXPECT_EQ(data.parallel(), world_size() > 1 ? "data" : "none");
    TrainOptions t = adam(3);
    t.batch = 47;  // uneven shares, and a last batch of 18 rows
    Trainer a(data, d.all(), t);
    Trainer b(whole, d.all(), t);
    const auto ea = a.fit();
    const auto eb = b.fit();
    ASSERT_EQ(ea.size(), eb.size());
    for (size_t e = 0; e < ea.size(); ++e) {
        EXPECT_LT(relative(ea[e].loss, eb[e].loss), 1e-5) << "epoch " << e + 1;
    }
    for (const Parameter& p : whole.parameters()) {
        const std::vector<float> x = data.get_parameter(p.name);
        const std::vector<float> y = whole.get_parameter(p.name);
        double worst = 0.0, sum = 0.0;
        for (size_t i = 0; i < x.size(); ++i) {
            worst = std::max(worst, double(std::abs(x[i] - y[i])));
            sum += double(x[i]) * double(i % 7 + 1);
        }
        EXPECT_LT(worst, 1e-4) << p.name;
        double lo = sum, hi = sum;
        MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(lo, hi) << p.name << ": the ranks' weights differ";
    }
}

TEST(DataParallel, EmptySharesOfATinyBatch) {
    // Batches of 2 rows over 3 ranks: a rank with no rows contributes zero gradients.
    Data d(30, 23, 200);
    const NetworkConfig config = NetworkConfig::from_json(kSoftmax);
    Network data = Network::create(config, d.widths(), on("mpi", "data"));
    Network whole = Network::create(config, d.widths(), on("local"));
    TrainOptions t = adam(2, OptimizerKind::kAdamW);
    t.batch = 2;
    Trainer a(data, d.all(), t);
    Trainer b(whole, d.all(), t);
    const auto ea = a.fit();
    const auto eb = b.fit();
    for (size_t e = 0; e < ea.size(); ++e) EXPECT_LT(relative(ea[e].loss, eb[e].loss), 1e-5);
}

TEST(Parallel, AutoPicksTheModeThatMovesFewerBytes) {
    if (world_size() == 1) GTEST_SKIP() << "one rank: nothing to choose";
    // Wide items, small hidden: activations are cheap, gradients are not -> model.
    Data wide(100, 3001, 2000);
    NetworkOptions o = on("mpi", "auto");
    o.batch = 64;
    EXPECT_EQ(Network::create(NetworkConfig::from_json(autoencoder()), wide.widths(), o).parallel(),
              "model");
    // Few items, a wide hidden layer and big batches: the gradients are smaller -> data.
    Data narrow(100, 20, 400);
    const char* wide_hidden = R"({
      "Version": 0.9, "Name": "narrow", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 512, "Activation": "Tanh"},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid"}
      ]})";
    o.batch = 4096;
    EXPECT_EQ(Network::create(NetworkConfig::from_json(wide_hidden), narrow.widths(), o).parallel(),
              "data");
}

TEST(ModelParallel, RefusesWhatASplitNetworkCannotRunYet) {
    if (world_size() == 1) GTEST_SKIP() << "one rank splits nothing";
    Data d(20, 13, 100);
    const char* shared = R"({
      "Version": 0.9, "Name": "tied", "Kind": "AutoEncoder", "ErrorFunction": "CrossEntropy",
      "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
        {"Name": "Hidden", "Kind": "Hidden", "N": 8, "Activation": "Tanh"},
        {"Name": "Hidden2", "Kind": "Hidden", "N": 8, "Activation": "Tanh", "Source": "Hidden"},
        {"Name": "Hidden3", "Kind": "Hidden", "N": 8, "Activation": "Tanh", "Source": "Hidden2",
         "SharedWeights": [{"SourceInputLayer": "Hidden", "SourceOutputLayer": "Hidden2",
                            "InputLayer": "Hidden2", "Transposed": false}]},
        {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
         "Activation": "Sigmoid", "Source": "Hidden3"}
      ]})";
    try {
        Network::create(NetworkConfig::from_json(shared), d.widths(), on("mpi"));
        ADD_FAILURE() << "a split network with SharedWeights was built";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kNotImplemented);
        EXPECT_NE(std::string(e.what()).find("SharedWeights"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace sparsenet

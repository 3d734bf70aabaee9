// Training inside a service: cancel() from another thread or a callback stops at a batch
// boundary with a consistent network, early_stop ends fit(), and Network::save replaces a
// model atomically (a failed save leaves the previous file as it was, and no temporary file).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <thread>

#include "library/library_test_util.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

constexpr uint32_t kItems = 80;

struct Data {
    Dataset in, out;
    Data() {
        GenerateOptions g;
        g.users = 640;
        g.items = kItems;
        g.nnz = 640 * 10;
        g.seed = 4;
        in = generate(g).train;
        out = in;
        in.name = "in";
        out.name = "out";
    }
    std::map<std::string, const Dataset*> map() const { return {{"in", &in}, {"out", &out}}; }
};

Network fresh_network() {
    return Network::create(testing::autoencoder_config(16), {{"in", kItems}, {"out", kItems}});
}

TrainOptions options(uint32_t epochs) {
    TrainOptions t;
    t.epochs = epochs;
    t.batch = 32;  // 20 batches per epoch
    t.optimizer.kind = OptimizerKind::kAdam;
    t.optimizer.learning_rate = 0.01f;
    return t;
}

std::vector<float> all_parameters(const Network& net) {
    std::vector<float> all;
    for (const Parameter& p : net.parameters()) {
        const std::vector<float> v = net.get_parameter(p.name);
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}

std::vector<std::string> directory_entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

TEST(TrainerControl, CancelFromAnotherThreadStopsAtABatchBoundary) {
    const Data data;
    Network net = fresh_network();
    std::atomic<uint64_t> batches_seen{0};
    TrainOptions t = options(50);
    t.on_batch = [&](const BatchProgress&) { ++batches_seen; };
    Trainer trainer(net, data.map(), t);
    std::thread canceller([&] {
        while (batches_seen.load() < 30) std::this_thread::yield();
        trainer.cancel();
    });
    const std::vector<EpochStats> stats = trainer.fit();
    canceller.join();
    ASSERT_FALSE(stats.empty());
    EXPECT_LT(stats.size(), 50u);
    uint64_t steps = 0;
    for (size_t i = 0; i < stats.size(); ++i) {
        steps += stats[i].batches;
        EXPECT_EQ(stats[i].complete, i + 1 < stats.size() || stats[i].batches == 20) << i;
        EXPECT_TRUE(std::isfinite(stats[i].loss));
    }
    EXPECT_EQ(steps, batches_seen.load());
    EXPECT_FALSE(trainer.cancel_requested());  // consumed by the fit() it stopped

    // The same number of steps, stopped deterministically from the callback, gives the same
    // weights bit for bit: the cancelled network is exactly the one after `steps` whole steps.
    Network twin = fresh_network();
    uint64_t twin_steps = 0;
    Trainer* twin_trainer = nullptr;
    TrainOptions u = options(50);
    u.on_batch = [&](const BatchProgress&) {
        if (++twin_steps == steps) twin_trainer->cancel();
    };
    Trainer second(twin, data.map(), u);
    twin_trainer = &second;
    second.fit();
    EXPECT_EQ(all_parameters(twin), all_parameters(net));

    // Training goes on after a cancel: the next epoch is a whole one.
    const EpochStats next = trainer.train_epoch();
    EXPECT_TRUE(next.complete);
    EXPECT_EQ(next.batches, 20u);
    EXPECT_EQ(next.epoch, trainer.epochs_done());
}

TEST(TrainerControl, CancelInsideAnEpochReportsThePartialEpoch) {
    const Data data;
    Network net = fresh_network();
    Trainer* self = nullptr;
    int epochs_reported = 0;
    TrainOptions t = options(5);
    t.on_batch = [&](const BatchProgress& p) {
        if (p.epoch == 2 && p.batch == 7) self->cancel();
    };
    t.on_epoch = [&](const EpochStats&) { ++epochs_reported; };
    Trainer trainer(net, data.map(), t);
    self = &trainer;
    const std::vector<EpochStats> stats = trainer.fit();
    ASSERT_EQ(stats.size(), 2u);
    EXPECT_TRUE(stats[0].complete);
    EXPECT_EQ(stats[0].examples, data.in.rows);
    EXPECT_FALSE(stats[1].complete);
    EXPECT_EQ(stats[1].batches, 7u);
    EXPECT_EQ(stats[1].examples, 7u * 32u);
    EXPECT_EQ(epochs_reported, 1);  // on_epoch is for complete epochs only
    EXPECT_EQ(trainer.epochs_done(), 2u);
}

TEST(TrainerControl, CancelBeforeFitRunsNothingAndIsConsumed) {
    const Data data;
    Network net = fresh_network();
    const std::vector<float> before = all_parameters(net);
    Trainer trainer(net, data.map(), options(3));
    trainer.cancel();
    EXPECT_TRUE(trainer.cancel_requested());
    EXPECT_TRUE(trainer.fit().empty());
    EXPECT_EQ(all_parameters(net), before);
    EXPECT_EQ(trainer.epochs_done(), 0u);
    EXPECT_FALSE(trainer.cancel_requested());
    EXPECT_EQ(trainer.fit().size(), 3u);
    EXPECT_NE(all_parameters(net), before);
}

TEST(TrainerControl, EarlyStopEndsFit) {
    const Data data;
    Network net = fresh_network();
    TrainOptions t = options(10);
    std::vector<uint32_t> asked;
    t.early_stop = [&](const EpochStats& s) {
        asked.push_back(s.epoch);
        return s.epoch == 3;
    };
    Trainer trainer(net, data.map(), t);
    const std::vector<EpochStats> stats = trainer.fit();
    ASSERT_EQ(stats.size(), 3u);
    EXPECT_EQ(asked, (std::vector<uint32_t>{1, 2, 3}));
    for (const EpochStats& s : stats) EXPECT_TRUE(s.complete);
}

TEST(TrainerControl, SaveReplacesTheModelAndLeavesNoTemporaryFile) {
    testing::TempDir dir;
    const std::string path = dir.file("model.nc");
    Network a = testing::random_network(kItems, 16, 1);
    Network b = testing::random_network(kItems, 16, 2);
    a.save(path);
    b.save(path);
    EXPECT_EQ(all_parameters(Network::load(path)), all_parameters(b));
    EXPECT_EQ(directory_entries(dir.path()), (std::vector<std::string>{"model.nc"}));
    // A relative path (the temporary file and the directory sync use ".").
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    a.save("model.nc");
    std::filesystem::current_path(cwd);
    EXPECT_EQ(all_parameters(Network::load(path)), all_parameters(a));
    EXPECT_EQ(directory_entries(dir.path()), (std::vector<std::string>{"model.nc"}));
}

// A failure while writing (here the file-size limit, which stops even root) leaves the
// previous model byte for byte and removes the temporary file.
TEST(TrainerControl, FailedSaveKeepsThePreviousModel) {
    testing::TempDir dir;
    const std::string path = dir.file("model.nc");
    testing::random_network(kItems, 16, 1).save(path);
    const std::string before = testing::read_file(path);
    Network big = testing::random_network(4000, 64, 2);  // 2 MB of weights

    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    rlimit small = old;
    small.rlim_cur = 256 * 1024;
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // writes then fail with EFBIG
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    std::string message;
    ErrorCategory category = ErrorCategory::kInternal;
    try {
        big.save(path);
    } catch (const Error& e) {
        message = e.what();
        category = e.category();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);

    EXPECT_EQ(category, ErrorCategory::kIo) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_EQ(testing::read_file(path), before);
    EXPECT_EQ(directory_entries(dir.path()), (std::vector<std::string>{"model.nc"}));
    EXPECT_NO_THROW(Network::load(path));
}

TEST(TrainerControl, SaveErrorsNameThePathAndLeaveNothingBehind) {
    testing::TempDir dir;
    Network net = testing::random_network(kItems, 16, 1);
    // The directory does not exist.
    try {
        net.save(dir.file("missing/model.nc"));
        FAIL() << "expected Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kIo);
        EXPECT_NE(std::string(e.what()).find(dir.file("missing/model.nc")), std::string::npos)
            << e.what();
    }
    // The path is a non-empty directory: the rename fails, the directory stays as it was.
    std::filesystem::create_directory(dir.file("taken"));
    testing::write_file(dir.file("taken/keep"), "x");
    EXPECT_THROW(net.save(dir.file("taken")), Error);
    EXPECT_EQ(testing::read_file(dir.file("taken/keep")), "x");
    EXPECT_EQ(directory_entries(dir.path()), (std::vector<std::string>{"taken"}));
    // A directory we may not write to (root may write anywhere: nothing to check then).
    if (geteuid() != 0) {
        std::filesystem::create_directory(dir.file("ro"));
        net.save(dir.file("ro/model.nc"));
        const std::string before = testing::read_file(dir.file("ro/model.nc"));
        chmod(dir.file("ro").c_str(), 0555);
        EXPECT_THROW(testing::random_network(kItems, 16, 9).save(dir.file("ro/model.nc")), Error);
        chmod(dir.file("ro").c_str(), 0755);
        EXPECT_EQ(testing::read_file(dir.file("ro/model.nc")), before);
        EXPECT_EQ(directory_entries(dir.file("ro")), (std::vector<std::string>{"model.nc"}));
    }
}

}  // namespace
}  // namespace sparsenet

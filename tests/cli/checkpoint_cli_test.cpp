// `sparsenet train --checkpoint ... --resume` against SIGKILL: a training process killed at
// random points, many times over, always leaves a checkpoint that loads and equals a checkpoint
// the uninterrupted run passes through (never a torn or mixed file), and resuming after every
// kill ends with the uninterrupted run's model bit for bit. Also SIGTERM (checkpoint, exit 143),
// --keep-best across a resume and the flags' errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "io/model_file.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/test_support.h"

extern char** environ;
extern "C" char* openblas_get_corename(void);

namespace sparsenet {
namespace {

using testing::TempDir;

const char* kConfig = R"({
  "Version": 0.9, "Name": "kill", "ErrorFunction": "ScaledMarginalCrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 32, "Activation": "Relu", "pDropout": 0.1},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
     "Activation": "Sigmoid", "WeightInit": {"Bias": -2.0}}
  ]})";

constexpr uint32_t kEpochs = 6;
constexpr uint32_t kBatch = 20;
constexpr uint64_t kUsers = 600;  // 30 batches per epoch

using Position = std::pair<uint32_t, uint64_t>;  // (epochs complete, batches of the next)

std::vector<float> flatten(const io::ModelFile& m) {
    std::vector<float> all;
    for (const io::ModelWeight& w : m.weights)
        all.insert(all.end(), w.values.begin(), w.values.end());
    for (const io::ModelBias& b : m.biases) all.insert(all.end(), b.values.begin(), b.values.end());
    return all;
}

std::vector<float> flatten(const Network& net) {
    std::vector<float> all;
    for (const Parameter& p : net.parameters()) {
        const std::vector<float> v = net.get_parameter(p.name);
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CheckpointCli : public ::testing::Test {
  protected:
    void SetUp() override {
        // The CLI picks OpenBLAS's kernels through OPENBLAS_CORETYPE (tools/main.cpp), and
        // other kernels round differently: the children use this process's, so that the
        // library's run here and the CLI's agree bit for bit.
        setenv("OPENBLAS_CORETYPE", openblas_get_corename(), 1);
        config_ = dir_.file("net.json");
        testing::write_file(config_, kConfig);
        data_ = dir_.file("data.nc");
        ASSERT_EQ(run("generate -o " + data_ + " --users " + std::to_string(kUsers) +
                      " --items 300 --nnz 9000 --seed 3 -q"),
                  0)
            << out_;
    }

    int run(const std::string& args) {
        return testing::run_command(std::string(SPARSENET_CLI_PATH) + " " + args, &out_);
    }

    std::vector<std::string> train_args(const std::string& model, const std::string& checkpoint,
                                        bool resume) const {
        std::vector<std::string> a = {SPARSENET_CLI_PATH, "train", "-c", config_, "-i", data_, "-n",
                                      model, "-b", std::to_string(kBatch), "-e",
                                      std::to_string(kEpochs), "--optimizer", "adam",
                                      "--learning-rate", "0.01", "--seed", "9", "--threads", "2",
                                      "--device", "cpu", "-q", "--checkpoint", checkpoint,
                                      // below any batch's time: a checkpoint after every batch
                                      "--checkpoint-minutes", "1e-9"};
        if (resume) a.push_back("--resume");
        return a;
    }

    // Starts the CLI with stdout and stderr to `output` (/dev/null by default).
    static pid_t spawn(const std::vector<std::string>& args,
                       const std::string& output = "/dev/null") {
        std::vector<char*> argv;
        for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        pid_t pid = -1;
        const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        return rc == 0 ? pid : -1;
    }

    // The parameters after every step of the uninterrupted run (the same options through the
    // library, on the same device and threads), by checkpoint position.
    std::map<Position, std::vector<float>> reference(std::vector<float>* final_params) const {
        const NetworkConfig config = NetworkConfig::from_file(config_);
        std::map<std::string, Dataset> data;
        for (Dataset& d : read_datasets(data_)) data[d.name] = std::move(d);
        std::map<std::string, uint32_t> widths;
        std::map<std::string, const Dataset*> ptrs;
        for (const auto& kv : data) {
            widths[kv.first] = kv.second.cols;
            ptrs[kv.first] = &kv.second;
        }
        NetworkOptions no;
        no.device = "cpu";
        no.threads = 2;
        no.seed = 9;
        no.comm = CommKind::kLocal;
        Network net = Network::create(config, widths, no);
        TrainOptions o = train_options(config);
        o.epochs = kEpochs;
        o.batch = kBatch;
        o.optimizer.kind = OptimizerKind::kAdam;
        o.optimizer.learning_rate = 0.01f;
        o.seed = 9;
        std::map<Position, std::vector<float>> at;
        o.on_batch = [&](const BatchProgress& p) {
            const Position pos =
                p.batch == p.batches ? Position{p.epoch, 0} : Position{p.epoch - 1, p.batch};
            at[pos] = flatten(net);
        };
        Trainer(net, ptrs, o).fit();
        *final_params = flatten(net);
        return at;
    }

    TempDir dir_;
    std::string config_, data_, out_;
};

TEST_F(CheckpointCli, SigkillAtRandomPointsNeverLeavesATornCheckpoint) {
    std::vector<float> final_params;
    const std::map<Position, std::vector<float>> at = reference(&final_params);
    ASSERT_EQ(at.size(), size_t(kEpochs) * 30);

    // The uninterrupted CLI run: the same model as the library's, and its duration.
    const std::string straight = dir_.file("straight.nc");
    const auto t0 = std::chrono::steady_clock::now();
    {
        std::string cmd;
        for (const std::string& a : train_args(straight, dir_.file("straight.ck"), false))
            cmd += a + " ";
        ASSERT_EQ(testing::run_command(cmd, &out_), 0) << out_;
    }
    const double full_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(identical(flatten(io::read_model(straight)), final_params))
        << "the CLI and the library disagree on the uninterrupted run";

    const int rounds =
        std::getenv("SPARSENET_KILL_ROUNDS") ? std::atoi(std::getenv("SPARSENET_KILL_ROUNDS")) : 30;
    const uint64_t seed = std::random_device{}();
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> delay(0.0, full_seconds * 0.6);
    const std::string model = dir_.file("model.nc"), ck = dir_.file("ck");
    int killed = 0, with_temp = 0, finished = 0, restarts = 0;
    Position last{0, 0};
    for (int round = 0; round < rounds; ++round) {
        const bool resume = std::filesystem::exists(ck);
        const pid_t pid = spawn(train_args(model, ck, resume));
        ASSERT_GT(pid, 0);
        const double wait = delay(rng);
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status)) {
            ++killed;
        } else {
            ASSERT_EQ(WEXITSTATUS(status), 0) << "round " << round;
            ++finished;
        }
        // A killed write leaves its temporary file (never read); the next run removes those of
        // dead processes when it starts, so they never pile up.
        int temps = 0;
        for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
            temps += e.path().filename().string().rfind("ck.tmp.", 0) == 0;
        }
        with_temp += temps > 0;
        EXPECT_LE(temps, 2) << "round " << round;
        if (!std::filesystem::exists(ck)) continue;  // killed before the first checkpoint
        // The checkpoint loads as a model, and it is one the uninterrupted run passes through.
        const io::ModelFile file = io::read_model(ck, true);
        ASSERT_TRUE(file.training.has_value()) << "round " << round;
        const Position pos{file.training->epochs_complete, file.training->batches_done};
        const auto it = at.find(pos);
        ASSERT_NE(it, at.end()) << "round " << round << ": position " << pos.first << "/"
                                << pos.second;
        ASSERT_TRUE(identical(flatten(file), it->second))
            << "round " << round << ": checkpoint at " << pos.first << "/" << pos.second
            << " differs from the uninterrupted run's";
        NetworkOptions no;
        no.device = "cpu";
        no.comm = CommKind::kLocal;
        ASSERT_TRUE(identical(flatten(Network::load(ck, no)), it->second));
        EXPECT_GE(pos, last) << "round " << round << ": a checkpoint went backwards";
        last = pos;
        if (WIFEXITED(status) || pos == Position{kEpochs, 0}) {
            // This one finished: its model is the uninterrupted run's. Start over.
            if (WIFEXITED(status)) {
                ASSERT_TRUE(identical(flatten(io::read_model(model)), final_params));
            }
            std::filesystem::remove(ck);
            last = {0, 0};
            ++restarts;
        }
    }
    // The last run resumes to the end: the uninterrupted run's model, bit for bit.
    std::string cmd;
    for (const std::string& a : train_args(model, ck, std::filesystem::exists(ck))) cmd += a + " ";
    ASSERT_EQ(testing::run_command(cmd, &out_), 0) << out_;
    EXPECT_TRUE(identical(flatten(io::read_model(model)), final_params));
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
        EXPECT_NE(e.path().filename().string().rfind("ck.tmp.", 0), 0u)
            << "a finished run leaves no temporary file: " << e.path();
    }
    std::printf(
        "kill test (seed %llu, full run %.2f s): %d rounds, %d killed, %d finished first, "
        "%d rounds with a temporary file of an interrupted write, %d restarts from scratch\n",
        static_cast<unsigned long long>(seed), full_seconds, rounds, killed, finished, with_temp,
        restarts);
    EXPECT_GT(killed, rounds / 2);
}

TEST_F(CheckpointCli, SigtermWritesACheckpointAndResumeFinishesTheRun) {
    // 60 epochs without per-batch checkpoints (SIGTERM is what writes this one), printing a
    // line per epoch; the uninterrupted run first.
    auto args_for = [&](const std::string& model, const std::string& ck) {
        std::vector<std::string> a = train_args(model, ck, false);
        a.resize(a.size() - 2);  // drop --checkpoint-minutes
        a.erase(std::find(a.begin(), a.end(), "-q"));
        *std::find(a.begin(), a.end(), std::to_string(kEpochs)) = "60";
        return a;
    };
    const std::string straight = dir_.file("straight.nc");
    std::string cmd;
    for (const std::string& a : args_for(straight, dir_.file("s.ck"))) cmd += a + " ";
    ASSERT_EQ(testing::run_command(cmd, &out_), 0) << out_;

    const std::string model = dir_.file("model.nc"), ck = dir_.file("ck");
    std::vector<std::string> args = args_for(model, ck);
    const std::string log = dir_.file("log.txt");
    const pid_t pid = spawn(args, log);
    ASSERT_GT(pid, 0);
    // Signalled once epoch 3 has been reported (and so is well inside the run).
    for (int i = 0; i < 6000 && testing::read_file(log).find("epoch 3/60") == std::string::npos;
         ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    const std::string printed = testing::read_file(log);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << printed;
    if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "training finished before the signal";
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << printed;
    EXPECT_NE(printed.find("stopped by signal 15"), std::string::npos) << printed;
    EXPECT_FALSE(std::filesystem::exists(model)) << "no model presented as complete";
    ASSERT_TRUE(std::filesystem::exists(ck));
    const io::ModelFile file = io::read_model(ck, true);
    EXPECT_GE(file.training->epochs_complete, 3u);
    EXPECT_LT(file.training->epochs_complete, 60u);

    args.push_back("--resume");
    cmd.clear();
    for (const std::string& a : args) cmd += a + " ";
    ASSERT_EQ(testing::run_command(cmd, &out_), 0) << out_;
    EXPECT_NE(out_.find("resumed from " + ck), std::string::npos) << out_;
    EXPECT_TRUE(identical(flatten(io::read_model(model)), flatten(io::read_model(straight))));
}

TEST_F(CheckpointCli, FlagErrorsAreNamed) {
    const std::string base =
        "train -c " + config_ + " -i " + data_ + " -n " + dir_.file("m.nc") + " -e 1 -q ";
    EXPECT_EQ(run(base + "--resume"), 2);
    EXPECT_NE(out_.find("m.nc.checkpoint does not exist"), std::string::npos) << out_;
    EXPECT_EQ(run(base + "--checkpoint-minutes 0"), 2);
    EXPECT_NE(out_.find("--checkpoint-minutes"), std::string::npos) << out_;
    EXPECT_EQ(run(base + "--checkpoint-every 0"), 2);
    EXPECT_NE(out_.find("--checkpoint-every"), std::string::npos) << out_;
    // The default checkpoint file is the model's name + .checkpoint; a resume with another batch
    // size is refused by name.
    ASSERT_EQ(run(base + "--checkpoint-every 1"), 0) << out_;
    EXPECT_TRUE(std::filesystem::exists(dir_.file("m.nc.checkpoint")));
    EXPECT_EQ(run(base + "--resume -b 7"), 2);
    EXPECT_NE(out_.find("written with batch = 1024; this run has batch = 7"), std::string::npos)
        << out_;
    // info says where a checkpoint stands.
    ASSERT_EQ(run("info " + dir_.file("m.nc.checkpoint")), 0) << out_;
    EXPECT_NE(out_.find("checkpoint: 1 epochs done; sgd, 1 steps; batch 1024, seed 12134"),
              std::string::npos)
        << out_;
    // A checkpoint is a model: predict reads it.
    EXPECT_EQ(run("predict -n " + dir_.file("m.nc.checkpoint") + " --input " + data_ + " -k 3 -s " +
                  dir_.file("recs.txt")),
              0)
        << out_;
}

TEST_F(CheckpointCli, DivergenceStopsWithTheEpochBatchAndLayerAndWritesNothing) {
    const std::string model = dir_.file("m.nc");
    EXPECT_EQ(run("train -c " + config_ + " -i " + data_ + " -n " + model +
                  " -b 20 -e 3 --learning-rate 1e30 --checkpoint-every 1 -q"),
              1)
        << out_;
    EXPECT_NE(out_.find("error: training diverged at epoch 1, batch "), std::string::npos) << out_;
    EXPECT_NE(out_.find("layer '"), std::string::npos) << out_;
    EXPECT_NE(out_.find("No checkpoint was written in this run"), std::string::npos) << out_;
    EXPECT_FALSE(std::filesystem::exists(model));
    EXPECT_FALSE(std::filesystem::exists(model + ".checkpoint"));
}

}  // namespace
}  // namespace sparsenet

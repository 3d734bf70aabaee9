// Resource errors, end to end through the CLI (docs/reliability.md, "Resource errors"):
//  * out of host memory, injected with an address-space limit (RLIMIT_AS) on the child: the
//    command exits 1 and says what was being allocated, how much, what the backend holds and
//    what to change; no model is written;
//  * a write that fails part-way, injected with a file size limit (RLIMIT_FSIZE, SIGXFSZ
//    ignored so the write fails with EFBIG) and with a real full file system (a small tmpfs in a
//    private mount namespace): every writer (train's model, generate's dataset and text, convert's
//    dataset, predict's recommendations) exits 1 naming the file, and leaves the previous file
//    byte for byte (or no file) and no temporary file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

// Sanitizers reserve terabytes of shadow address space, so an address-space limit stops the
// process before main(): the out-of-memory cases skip there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPARSENET_RESOURCE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SPARSENET_RESOURCE_TEST_SANITIZED 1
#endif
#endif

extern char** environ;

namespace sparsenet {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr uint64_t kGiB = uint64_t(1) << 30;

struct Limits {
    rlim_t address_space = RLIM_INFINITY;  // RLIMIT_AS, bytes
    rlim_t file_size = RLIM_INFINITY;      // RLIMIT_FSIZE, bytes
};

std::vector<std::string> split_args(const std::string& args) {
    std::istringstream in(args);
    std::vector<std::string> out;
    for (std::string a; in >> a;) out.push_back(a);
    return out;
}

// Runs `sparsenet <args>` (arguments split on spaces) in a child process with `limits` set
// between fork and exec, SIGXFSZ ignored (a write over the file size limit fails with EFBIG
// instead of killing the process), two OpenMP threads (the memory a run needs before its own
// allocations grows with the thread count: OpenBLAS and glibc reserve address space per
// thread) and a CPU-time limit of 120 s (a safety net: OpenBLAS spins forever when its buffer
// allocation fails, see docs/reliability.md). Returns the exit status (128 + signal when killed)
// and stdout + stderr in *output.
int run_limited(const std::string& args, const Limits& limits, std::string* output) {
    std::vector<std::string> argv_text = split_args(args);
    argv_text.insert(argv_text.begin(), SPARSENET_CLI_PATH);
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0) env_text.emplace_back(*e);
    }
    env_text.emplace_back("OMP_NUM_THREADS=2");
    // train's memory plan would refuse some of these runs before they allocate (docs/memory.md):
    // a limit no plan exceeds leaves them to fail where these tests look, in the allocations.
    env_text.emplace_back("SPARSENET_MEMORY_LIMIT_BYTES=18446744073709551615");
    std::vector<char*> envp;
    for (std::string& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);

    int fds[2];
    if (pipe(fds) != 0) return -1;
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {  // only async-signal-safe calls until exec
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        const rlimit as{limits.address_space, limits.address_space};
        const rlimit fsize{limits.file_size, limits.file_size};
        const rlimit cpu{120, 130};
        if (setrlimit(RLIMIT_AS, &as) != 0 || setrlimit(RLIMIT_FSIZE, &fsize) != 0 ||
            setrlimit(RLIMIT_CPU, &cpu) != 0) {
            _exit(126);
        }
        signal(SIGXFSZ, SIG_IGN);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    close(fds[1]);
    std::string text;
    char buffer[4096];
    for (;;) {
        const ssize_t n = read(fds[0], buffer, sizeof buffer);
        if (n > 0) {
            text.append(buffer, size_t(n));
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (output != nullptr) *output = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::set<std::string> listing(const std::string& dir) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
        names.insert(entry.path().filename().string());
    }
    return names;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

std::string network_config(int hidden) {
    return R"({"Version": 0.9, "Name": "resources", "ErrorFunction": "ScaledMarginalCrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": )" +
           std::to_string(hidden) + R"(, "Activation": "Sigmoid"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "gl_output",
     "Activation": "Sigmoid"}]})";
}

// ---- out of host memory ----

// The advice every out-of-memory message ends with.
void expect_advice(const std::string& out) {
    EXPECT_TRUE(contains(out, "a smaller --batch")) << out;
    EXPECT_TRUE(contains(out, "a smaller network")) << out;
    EXPECT_TRUE(contains(out, "mpirun -np N")) << out;
    EXPECT_TRUE(contains(out, "docs/parallelism.md")) << out;
    EXPECT_FALSE(contains(out, "internal error")) << out;
}

class HostMemory : public ::testing::Test {
  protected:
    void SetUp() override {
#ifdef SPARSENET_RESOURCE_TEST_SANITIZED
        GTEST_SKIP() << "built with a sanitizer: its shadow memory does not fit under an "
                        "address-space limit (RLIMIT_AS), so no limited run can start";
#endif
        // 131072 items: one [batch, items] float matrix is 512 KiB per batch row.
        ASSERT_EQ(testing::run_command(std::string(SPARSENET_CLI_PATH) + " generate -o " + narrow_ +
                                           " --users 64 --items 131072 --nnz 1000 --seed 5 -q",
                                       &out_),
                  0)
            << out_;
        testing::write_file(config_, network_config(16));
        // The same network on 64 rows in batches of 64 fits well under the limit: what the
        // failing runs below ask for is what does not fit.
        ASSERT_EQ(run_limited("train -c " + config_ + " -i " + narrow_ + " -n " + fits_ +
                                  " -b 64 -e 1 --device cpu -q",
                              {kLimit, RLIM_INFINITY}, &out_),
                  0)
            << "the control run does not fit under " << kLimit << " bytes of address space:\n"
            << out_;
        ASSERT_TRUE(fs::exists(fits_));
    }

    static constexpr rlim_t kLimit = 2 * kGiB;
    TempDir dir_;
    std::string narrow_ = dir_.file("narrow.nc"), config_ = dir_.file("net.json");
    std::string fits_ = dir_.file("fits.nc"), model_ = dir_.file("model.nc"), out_;
};

// 8192 rows in one batch: the output layer's activations are 8192 x 131072 floats (4 GiB).
TEST_F(HostMemory, TrainBatchTooLargeNamesActivationsAndSize) {
    const std::string wide = dir_.file("wide.nc");
    ASSERT_EQ(testing::run_command(std::string(SPARSENET_CLI_PATH) + " generate -o " + wide +
                                       " --users 8192 --items 131072 --nnz 40000 --seed 5 -q",
                                   &out_),
              0)
        << out_;
    const int rc = run_limited(
        "train -c " + config_ + " -i " + wide + " -n " + model_ + " -b 8192 -e 1 --device cpu -q",
        {kLimit, RLIM_INFINITY}, &out_);
    EXPECT_EQ(rc, 1) << out_;
    EXPECT_TRUE(contains(out_,
                         "sparsenet train: error: out of host memory allocating 4294967296 "
                         "bytes (4.0 GiB) for activations; this backend already holds "))
        << out_;
    expect_advice(out_);
    EXPECT_FALSE(fs::exists(model_));

    // predict with the model that fit: its batch of 8192 rows does not.
    EXPECT_EQ(run_limited("predict -n " + fits_ + " --input " + wide + " -k 10 -b 8192 -s " +
                              dir_.file("recs.txt") + " --device cpu",
                          {kLimit, RLIM_INFINITY}, &out_),
              1)
        << out_;
    EXPECT_TRUE(contains(out_,
                         "sparsenet predict: error: out of host memory allocating 4294967296 "
                         "bytes (4.0 GiB) for activations"))
        << out_;
    expect_advice(out_);
    EXPECT_FALSE(fs::exists(dir_.file("recs.txt")));
}

// A hidden layer of 16384 units: each weight matrix is 131072 x 16384 floats (8 GiB), the first
// allocation of the network.
TEST_F(HostMemory, NetworkTooLargeNamesWeightsAndSize) {
    testing::write_file(config_, network_config(16384));
    EXPECT_EQ(run_limited("train -c " + config_ + " -i " + narrow_ + " -n " + model_ +
                              " -b 64 -e 1 --device cpu -q",
                          {kLimit, RLIM_INFINITY}, &out_),
              1)
        << out_;
    EXPECT_TRUE(contains(out_,
                         "out of host memory allocating 8589934592 bytes (8.0 GiB) for weights; "
                         "this backend already holds 0 B in 0 buffers"))
        << out_;
    expect_advice(out_);
    EXPECT_FALSE(fs::exists(model_));
}

// A std::bad_alloc of a host allocation inside the library is reported as out of host memory
// (host_memory_guard): tests/backend/host_memory_test.cpp, HostMemoryGuard.*. Network::create no
// longer makes one here: its initial weights are drawn by chunks of rows (a hidden layer of 6144
// units, whose whole host copy of 3 GiB did not fit under 8 GiB beside the weights, now trains).

// ---- writes that fail part-way ----

// One writer: previous_args and next_args both write {out}, with different contents (so the file
// a failed run must leave differs from the one it would have written).
struct Writer {
    std::string name;
    std::string file;                      // the output's file name
    std::string previous_args, next_args;  // with {out} for the output path
    // Files next_args writes after {out} (convert's indexes): unchanged when {out} fails.
    std::vector<std::string> later_files = {};
    // A file size limit below what next_args writes to {out} (and above what it writes before).
    rlim_t file_size_limit = 1024;
    std::string limit_text = "1.0 KiB";  // as the message gives it

    std::vector<std::string> read_later_files() const {
        std::vector<std::string> contents;
        for (const std::string& f : later_files) contents.push_back(testing::read_file(f));
        return contents;
    }
};

std::string substitute(std::string args, const std::string& out) {
    const size_t at = args.find("{out}");
    if (at != std::string::npos) args.replace(at, 5, out);
    return args;
}

class FailedWrites : public ::testing::Test {
  protected:
    void SetUp() override {
        data_ = dir_.file("data.nc");
        data2_ = dir_.file("data2.nc");
        text_ = dir_.file("ratings.csv");
        text2_ = dir_.file("ratings2.csv");
        model_ = dir_.file("model-in.nc");
        config_ = dir_.file("net.json");
        testing::write_file(config_, network_config(16));
        const std::string cli = SPARSENET_CLI_PATH;
        ASSERT_EQ(testing::run_command(cli + " generate -o " + data_ + " --users 120 --items 40 " +
                                           "--nnz 900 --seed 2 -q --text " + text_,
                                       &out_),
                  0)
            << out_;
        ASSERT_EQ(testing::run_command(cli + " generate -o " + data2_ +
                                           " --users 150 --items 60 --nnz 1200 --seed 3 -q " +
                                           "--text " + text2_,
                                       &out_),
                  0)
            << out_;
        ASSERT_EQ(testing::run_command(cli + " train -c " + config_ + " -i " + data_ + " -n " +
                                           model_ + " -b 16 -e 1 --device cpu -q",
                                       &out_),
                  0)
            << out_;
        const std::string gen = "generate --users 400 --items 200 --nnz 6000 -q ";
        const std::string train = "train -c " + config_ + " -i " + data_ + " -b 16 --device cpu -q";
        const std::string convert = "convert -d gl_input,gl_output -f " + dir_.file("f.index") +
                                    " -s " + dir_.file("s.index") + " -c -q";
        const std::string predict = "predict -n " + model_ + " --input " + data_ + " --device cpu";
        writers_ = {
            {"train", "model.nc", train + " -e 1 -n {out}", train + " -e 2 -n {out}"},
            {"generate", "generated.nc", gen + "--seed 7 -o {out}", gen + "--seed 8 -o {out}"},
            // The dataset (about 38 KB) is written first and fits; the text (about 130 KB)
            // does not.
            {"generate --text",
             "ratings-out.csv",
             gen + "--seed 7 -o " + dir_.file("g1.nc") + " --text {out}",
             gen + "--seed 8 -o " + dir_.file("g2.nc") + " --text {out}",
             {},
             64 * 1024,
             "64.0 KiB"},
            {"convert",
             "converted.nc",
             convert + " -i " + text_ + " -o {out}",
             convert + " -i " + text2_ + " -o {out}",
             {dir_.file("f.index"), dir_.file("s.index")}},
            {"predict", "recs.txt", predict + " -k 20 -s {out}", predict + " -k 25 -s {out}", {}},
        };
    }

    // Writes the previous file of `w` into `dir` and returns its path.
    std::string write_previous(const Writer& w, const std::string& dir) {
        const std::string path = dir + "/" + w.file;
        EXPECT_EQ(run_limited(substitute(w.previous_args, path), {}, &out_), 0)
            << w.name << ": " << out_;
        return path;
    }

    // The message of a failed write of `path`: exit code 1, the path named, no internal error.
    void expect_write_failure(const Writer& w, int rc, const std::string& path) {
        EXPECT_EQ(rc, 1) << w.name << ": " << out_;
        EXPECT_TRUE(contains(out_, "sparsenet " + w.name.substr(0, w.name.find(' ')) + ": error: "))
            << w.name << ": " << out_;
        EXPECT_TRUE(contains(out_, path)) << w.name << ": " << out_;
        EXPECT_FALSE(contains(out_, "internal error")) << w.name << ": " << out_;
    }

    TempDir dir_;
    std::string data_, data2_, text_, text2_, model_, config_, out_;
    std::vector<Writer> writers_;
};

// RLIMIT_FSIZE below the output's size: the write fails with EFBIG part-way through.
TEST_F(FailedWrites, FileSizeLimitLeavesThePreviousFile) {
    for (const Writer& w : writers_) {
        const std::string out_dir = dir_.file("fsize-" + w.file);
        fs::create_directory(out_dir);
        const std::string path = write_previous(w, out_dir);
        const std::string before = testing::read_file(path);
        ASSERT_GT(before.size(), 2 * w.file_size_limit) << w.name;
        const std::set<std::string> names = listing(out_dir);
        const std::vector<std::string> later = w.read_later_files();

        const int rc =
            run_limited(substitute(w.next_args, path), {RLIM_INFINITY, w.file_size_limit}, &out_);
        expect_write_failure(w, rc, path);
        if (w.name != "train") {  // the model's message comes from io/model_file.cpp
            EXPECT_TRUE(contains(out_, "the file size limit (ulimit -f) is " + w.limit_text))
                << w.name << ": " << out_;
        }
        EXPECT_EQ(testing::read_file(path), before) << w.name << ": the previous file changed";
        EXPECT_EQ(listing(out_dir), names) << w.name << ": files left behind";
        EXPECT_EQ(w.read_later_files(), later) << w.name << ": written after the failure";

        // Without the limit the same command replaces the file with different contents.
        ASSERT_EQ(run_limited(substitute(w.next_args, path), {}, &out_), 0) << w.name << out_;
        EXPECT_NE(testing::read_file(path), before) << w.name;
        EXPECT_EQ(listing(out_dir), names) << w.name;
    }
}

// The same with the limit and no previous file: nothing is left.
TEST_F(FailedWrites, FileSizeLimitLeavesNoFile) {
    for (const Writer& w : writers_) {
        const std::string out_dir = dir_.file("fresh-" + w.file);
        fs::create_directory(out_dir);
        const std::string path = out_dir + "/" + w.file;
        const int rc =
            run_limited(substitute(w.next_args, path), {RLIM_INFINITY, w.file_size_limit}, &out_);
        expect_write_failure(w, rc, path);
        EXPECT_TRUE(listing(out_dir).empty()) << w.name << ": files left behind";
    }
}

// Runs `script` (sh) in a private mount namespace; returns its exit status and output.
int in_mount_namespace(const std::string& script, std::string* out) {
    return testing::run_command("unshare -m --propagation private sh -c '" + script + "'", out);
}

// A real full file system: a tmpfs (in a private mount namespace, so nothing outside sees it)
// holding the previous file and 4 KiB more, less than the new file needs.
TEST_F(FailedWrites, FullFileSystemLeavesThePreviousFile) {
    const std::string probe = dir_.file("probe");
    fs::create_directory(probe);
    std::string why;
    if (in_mount_namespace("mount -t tmpfs -o size=64k tmpfs " + probe, &why) != 0) {
        GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace (unshare -m; needs "
                        "root or CAP_SYS_ADMIN): "
                     << why;
    }
    for (const Writer& w : writers_) {
        const std::string previous_dir = dir_.file("previous-" + w.file);
        fs::create_directory(previous_dir);
        const std::string previous = write_previous(w, previous_dir);
        const std::string before = testing::read_file(previous);
        ASSERT_GT(before.size(), 8192u) << w.name;
        const uint64_t size = (before.size() + 4095) / 4096 * 4096 + 4096;

        // Inside the namespace: mount, copy the previous file in, run the writer, then copy out
        // what the tmpfs holds afterwards (it disappears with the namespace).
        const std::string mnt = dir_.file("mnt-" + w.file), after = dir_.file("after-" + w.file);
        fs::create_directory(mnt);
        fs::create_directory(after);
        const std::string path = mnt + "/" + w.file;
        const std::string script =
            "mount -t tmpfs -o size=" + std::to_string(size) + " tmpfs " + mnt + " || exit 90; " +
            "cp " + previous + " " + path + " || exit 91; " + SPARSENET_CLI_PATH + " " +
            substitute(w.next_args, path) + "; echo $? > " + after + "/rc; df -k " + mnt +
            "; cp -a " + mnt + "/. " + after + "/files || exit 92";
        fs::create_directory(after + "/files");
        const std::vector<std::string> later = w.read_later_files();
        ASSERT_EQ(in_mount_namespace(script, &out_), 0) << w.name << ": " << out_;
        const int rc = std::atoi(testing::read_file(after + "/rc").c_str());
        expect_write_failure(w, rc, path);
        if (w.name != "train") {
            EXPECT_TRUE(contains(out_,
                                 "not written (a previous file of that name is left as it "
                                 "was)"))
                << w.name << ": " << out_;
        }
        EXPECT_EQ(listing(after + "/files"), std::set<std::string>{w.file})
            << w.name << ": files left behind";
        EXPECT_EQ(testing::read_file(after + "/files/" + w.file), before)
            << w.name << ": the previous file changed";
        EXPECT_EQ(w.read_later_files(), later) << w.name << ": written after the failure";
    }
}

// A full tmpfs and no previous file: nothing is left (no file, no temporary file).
TEST_F(FailedWrites, FullFileSystemLeavesNoFile) {
    const std::string probe = dir_.file("probe");
    fs::create_directory(probe);
    std::string why;
    if (in_mount_namespace("mount -t tmpfs -o size=64k tmpfs " + probe, &why) != 0) {
        GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace (unshare -m; needs "
                        "root or CAP_SYS_ADMIN): "
                     << why;
    }
    for (const Writer& w : writers_) {
        const std::string mnt = dir_.file("empty-mnt-" + w.file);
        const std::string after = dir_.file("empty-after-" + w.file);
        fs::create_directory(mnt);
        fs::create_directory(after);
        fs::create_directory(after + "/files");
        const std::string path = mnt + "/" + w.file;
        const std::string script = "mount -t tmpfs -o size=4096 tmpfs " + mnt + " || exit 90; " +
                                   SPARSENET_CLI_PATH + " " + substitute(w.next_args, path) +
                                   "; echo $? > " + after + "/rc; cp -a " + mnt + "/. " + after +
                                   "/files || exit 92";
        ASSERT_EQ(in_mount_namespace(script, &out_), 0) << w.name << ": " << out_;
        expect_write_failure(w, std::atoi(testing::read_file(after + "/rc").c_str()), path);
        EXPECT_TRUE(listing(after + "/files").empty()) << w.name << ": files left behind";
    }
}

}  // namespace
}  // namespace sparsenet

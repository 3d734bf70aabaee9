// `sparsenet serve` as a child process for the CLI tests (tests/cli: SPARSENET_CLI_PATH names the
// build's binary), and the JSON helpers their requests and answers need.
#pragma once

#include <gtest/gtest.h>
#include <json/json.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

extern char** environ;

namespace sparsenet::testing {

// The JSON value of `text`; a test failure (and a null value) when it is not JSON.
inline Json::Value parse_json(const std::string& text) {
    Json::CharReaderBuilder builder;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    Json::Value v;
    std::string errors;
    if (!reader->parse(text.data(), text.data() + text.size(), &v, &errors)) {
        ADD_FAILURE() << "not JSON: " << text << "\n" << errors;
    }
    return v;
}

// `v` as one line of JSON.
inline std::string write_json(const Json::Value& v) {
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "";
    return Json::writeString(builder, v);
}

// A `sparsenet serve` child process: started with --port 0, its stdout and stderr in `log`, its
// port read from its log. Killed (SIGKILL) when destroyed if still running.
class ServeProcess {
  public:
    using Clock = std::chrono::steady_clock;

    ServeProcess(const std::string& args, const std::string& log) : log_(log) {
        const std::string command = std::string(SPARSENET_CLI_PATH) + " serve --port 0 " + args;
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        // exec: the shell splits the arguments and becomes the server (its pid is ours).
        const std::string exec = "exec " + command;
        const char* argv[] = {"/bin/sh", "-c", exec.c_str(), nullptr};
        const int rc = posix_spawn(&pid_, "/bin/sh", &actions, nullptr,
                                   const_cast<char* const*>(argv), environ);
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) {
            ADD_FAILURE() << "posix_spawn failed: " << rc;
            pid_ = -1;
        }
    }
    ~ServeProcess() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    ServeProcess(const ServeProcess&) = delete;
    ServeProcess& operator=(const ServeProcess&) = delete;

    // Waits for "listening on http://127.0.0.1:PORT" in the log; 0 when the process ended or
    // a minute passed.
    int port() {
        const char* mark = "listening on http://127.0.0.1:";
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        while (Clock::now() < deadline) {
            const std::string text = log();
            const size_t at = text.find(mark);
            if (at != std::string::npos) {
                const size_t start = at + std::strlen(mark);
                const size_t end = text.find(' ', start);
                if (end != std::string::npos) return std::stoi(text.substr(start, end - start));
            }
            if (exited()) return 0;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return 0;
    }

    std::string log() const {
        std::ifstream in(log_);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

    void signal(int sig) const { kill(pid_, sig); }

    bool exited() {
        if (pid_ <= 0) return true;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            status_ = status;
            pid_ = -1;
            return true;
        }
        return false;
    }

    // The exit code after waiting up to 2 minutes; -1 if it did not exit (or by a signal).
    int wait_exit() {
        const auto deadline = Clock::now() + std::chrono::seconds(120);
        while (!exited() && Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (pid_ > 0) return -1;
        return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
    }

  private:
    std::string log_;
    pid_t pid_ = -1;
    int status_ = 0;
};

}  // namespace sparsenet::testing

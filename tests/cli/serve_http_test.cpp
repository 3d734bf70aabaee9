// The HTTP front end of `sparsenet serve` alone (tools/serve_http.cpp, compiled in), in this
// process with a handler of the test's own and real sockets (cpp-httplib's client): several
// event loops answering at once, a handler that blocks one connection while the others are
// answered, connections sharing a loop, and a drain with requests in flight. Also run under
// ThreadSanitizer (`make test-tsan`): the loops, the accepting thread and the handlers share the
// server's state.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve_http.h"

namespace sparsenet::cli::serve {
namespace {

using namespace std::chrono_literals;

// A gate the handler waits at until the test opens it.
class Latch {
  public:
    void open() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return open_; });
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool open_ = false;
};

// A server on a free port with `loops` loops, run on a thread of its own until drained.
// POST /echo answers its body; GET /slow waits for `slow_gate` (counting `slow_entered` first).
class Running {
  public:
    explicit Running(int loops) {
        HttpOptions options;
        options.port = 0;
        options.workers = loops;
        options.max_connections = 256;
        server_ = std::make_unique<HttpServer>(
            options, [this](const HttpRequest& req) { return handle(req); },
            [this](const std::string&, int) { ++logged; },
            [](const std::string& message) { return "{\"error\": \"" + message + "\"}"; });
        thread_ = std::thread([this] { server_->run(); });
    }
    ~Running() {
        slow_gate.open();
        if (thread_.joinable()) stop();
    }
    int port() const { return server_->port(); }
    // drain(), then wait for run() to return.
    void stop() {
        server_->drain();
        thread_.join();
    }
    void drain() { server_->drain(); }
    void join() { thread_.join(); }

    Latch slow_gate;
    std::atomic<int> slow_entered{0};
    std::atomic<int> handled{0};
    std::atomic<int> logged{0};

  private:
    HttpResponse handle(const HttpRequest& req) {
        HttpResponse res;
        if (req.path == "/slow") {
            ++slow_entered;
            slow_gate.wait();
            res.body = "slow";
        } else if (req.path == "/echo") {
            res.body = req.body;
        } else {
            res.status = 404;
        }
        ++handled;
        return res;
    }
    std::unique_ptr<HttpServer> server_;
    std::thread thread_;
};

std::unique_ptr<httplib::Client> client(int port) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);
    c->set_read_timeout(30, 0);
    c->set_connection_timeout(10, 0);
    return c;
}

// Waits (at most 10 s) until `pred` holds.
template <class Pred>
bool eventually(Pred pred) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

// connections clients, each sending `requests` keep-alive requests with bodies of its own; every
// answer must be its own request's body. Returns the number of correct answers.
int echo_from_many(int port, int connections, int requests) {
    std::atomic<int> correct{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < connections; ++c) {
        clients.emplace_back([&, c] {
            auto http = client(port);
            for (int r = 0; r < requests; ++r) {
                const std::string body = "client " + std::to_string(c) + " request " +
                                         std::to_string(r) + std::string(size_t(r * 97), 'x');
                auto res = http->Post("/echo", body, "text/plain");
                if (res && res->status == 200 && res->body == body) ++correct;
            }
        });
    }
    for (auto& t : clients) t.join();
    return correct;
}

TEST(HttpServer, ManyConnectionsAreAnsweredConcurrently) {
    Running server(4);
    EXPECT_EQ(echo_from_many(server.port(), 12, 25), 12 * 25);
    EXPECT_EQ(server.handled, 12 * 25);
    server.stop();
    EXPECT_EQ(server.logged, 12 * 25);  // every answer written was logged
}

TEST(HttpServer, MoreConnectionsThanLoopsShareThem) {
    Running server(2);
    EXPECT_EQ(echo_from_many(server.port(), 9, 10), 9 * 10);
}

TEST(HttpServer, AHandlerThatBlocksHoldsOnlyItsOwnConnection) {
    Running server(2);
    std::atomic<int> slow_status{0};
    std::thread slow([&] {
        auto http = client(server.port());
        auto res = http->Get("/slow");
        slow_status = res ? res->status : -1;
    });
    ASSERT_TRUE(eventually([&] { return server.slow_entered == 1; }));
    // The other loop answers, while the first is blocked in its handler.
    auto http = client(server.port());
    for (int i = 0; i < 5; ++i) {
        auto res = http->Post("/echo", "fast " + std::to_string(i), "text/plain");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->body, "fast " + std::to_string(i));
    }
    EXPECT_EQ(slow_status, 0);  // still waiting
    server.slow_gate.open();
    slow.join();
    EXPECT_EQ(slow_status, 200);
}

// Connections beyond one per loop share it: their handlers run on the workers, so a blocked one
// holds nothing but its own connection.
TEST(HttpServer, AHandlerOnASharedLoopHoldsNoNeighbour) {
    Running server(2);
    auto a = client(server.port());
    auto b = client(server.port());
    ASSERT_TRUE(a->Post("/echo", "a", "text/plain"));  // a and b take a loop each
    ASSERT_TRUE(b->Post("/echo", "b", "text/plain"));
    std::atomic<int> slow_status{0};
    std::thread slow([&] {
        auto c = client(server.port());  // shares a loop with a or b
        auto res = c->Get("/slow");
        slow_status = res ? res->status : -1;
    });
    ASSERT_TRUE(eventually([&] { return server.slow_entered == 1; }));
    for (int i = 0; i < 3; ++i) {
        auto ra = a->Post("/echo", "a" + std::to_string(i), "text/plain");
        auto rb = b->Post("/echo", "b" + std::to_string(i), "text/plain");
        ASSERT_TRUE(ra && rb);
        EXPECT_EQ(ra->body, "a" + std::to_string(i));
        EXPECT_EQ(rb->body, "b" + std::to_string(i));
    }
    EXPECT_EQ(slow_status, 0);
    server.slow_gate.open();
    slow.join();
    EXPECT_EQ(slow_status, 200);
}

// A loop whose thread runs a blocked handler takes no new connection while another loop's thread
// is free, whatever their counts: with the blocked /slow alone on the first loop and two idle
// connections on the second, counting the blocked loop as one connection more made a tie, and a
// tie went to the first loop, where a new connection's request waited for the handler.
TEST(HttpServer, ANewConnectionGoesToAFreeLoopNotBehindABlockedHandler) {
    Running server(2);
    std::atomic<int> slow_status{0};
    std::thread slow([&] {
        auto http = client(server.port());  // the first loop, alone: its handler runs there
        auto res = http->Get("/slow");
        slow_status = res ? res->status : -1;
    });
    ASSERT_TRUE(eventually([&] { return server.slow_entered == 1; }));
    auto a = client(server.port());  // the second loop, then one more there (its thread is free)
    auto b = client(server.port());
    ASSERT_TRUE(a->Post("/echo", "a", "text/plain"));
    ASSERT_TRUE(b->Post("/echo", "b", "text/plain"));
    auto c = client(server.port());
    c->set_read_timeout(5, 0);  // well inside the gate's wait: it opens only after the asserts
    auto res = c->Post("/echo", "c", "text/plain");
    ASSERT_TRUE(res) << "the new connection waited behind the blocked handler";
    EXPECT_EQ(res->body, "c");
    EXPECT_EQ(slow_status, 0);  // still blocked
    server.slow_gate.open();
    slow.join();
    EXPECT_EQ(slow_status, 200);
}

TEST(HttpServer, ADrainAnswersTheRequestsAlreadyReadAndCloses) {
    Running server(3);
    const int port = server.port();
    std::atomic<int> slow_status{0};
    std::string connection_header;
    std::thread slow([&] {
        auto http = client(port);
        auto res = http->Get("/slow");
        slow_status = res ? res->status : -1;
        if (res) connection_header = res->get_header_value("Connection");
    });
    ASSERT_TRUE(eventually([&] { return server.slow_entered == 1; }));
    // Idle keep-alive connections on other loops, and traffic until the drain.
    EXPECT_EQ(echo_from_many(port, 4, 3), 4 * 3);
    server.drain();
    // The drain has begun once the port is closed: the answer written after it says close.
    ASSERT_TRUE(eventually([&] {
        auto probe = client(port);
        probe->set_connection_timeout(1, 0);
        return !probe->Get("/echo");
    }));
    server.slow_gate.open();
    slow.join();
    server.join();  // run() returned: every connection closed
    EXPECT_EQ(slow_status, 200);
    EXPECT_EQ(connection_header, "close");
}

}  // namespace
}  // namespace sparsenet::cli::serve

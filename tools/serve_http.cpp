// The HTTP front end of `sparsenet serve` (serve_http.h). One thread accepts; --workers threads
// each run an event loop of their own, holding the connections given to it (the loop with the
// fewest at the time whose thread runs no handler). A connection alone on its loop is answered on
// the loop's thread; one that shares its loop hands its requests to a pool of --workers threads, so
// that a handler that blocks (a reload, a wait for a compute slot, a batch) never holds a
// neighbour's reads.
//
// Why Beast and not cpp-httplib 0.11 (Debian's, the previous front end): httplib gives each
// connection a pool thread for its whole life, reading with blocking calls, so with
// --connections 4 four clients that sent one header line held every thread and a good request
// waited 34.7 s; its keep-alive loop looked at the socket, not at its own read buffer, so a
// pipelined second request waited 5 s and was dropped; and it has one read timeout for headers
// and body alike. An event loop keeps a waiting client at the cost of its socket.
//
// Why the handler runs on the thread that read the request: with one loop thread handing each
// request to a pool of workers and the worker posting the answer back, a single query at one
// connection took p50 1.52-1.58 ms against 0.86-0.91 ms answered on the reading thread (2-core
// VM, the benchmark's ML-20M-shaped model, alternated runs): two thread wake-ups per request,
// each waiting for a core. One io_context run by all the threads, a strand per connection, was
// in between (1.25-1.53 ms): its reactor wakes another thread for every event. With at most
// --workers connections open each has a loop to itself, and no request changes thread.
#include "serve_http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "serve_request.h"
#include "sparsenet/error.h"

namespace sparsenet::cli::serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using error_code = boost::system::error_code;

Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// A fixed pool of threads running tasks in arrival order, for the requests of connections that
// share their loop. The queue needs no bound: a connection has at most one request in a worker at
// a time, so it holds at most --max-connections tasks.
class Workers {
  public:
    explicit Workers(int n) {
        for (int i = 0; i < std::max(1, n); ++i) threads_.emplace_back([this] { loop(); });
    }
    ~Workers() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        for (std::thread& t : threads_) t.join();
    }
    void post(std::function<void()> task) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            tasks_.push_back(std::move(task));
        }
        cv_.notify_one();
    }

  private:
    void loop() {
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
                if (tasks_.empty()) return;
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            task();
        }
    }
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> tasks_;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

class Session;

}  // namespace

struct HttpServer::Impl {
    HttpOptions options;
    Handler handler;
    Logger logger;
    ErrorBody error_body;
    using Guard = asio::executor_work_guard<asio::io_context::executor_type>;
    // A connection's loop: one thread, so nothing in a session needs a lock.
    struct Loop {
        asio::io_context context{1};
        std::optional<Guard> guard;
        std::atomic<size_t> connections{0};  // written by the accepting thread
        std::atomic<bool> busy{false};       // a handler runs on the loop's thread
    };
    // The accepting thread's loop: the acceptor and the members below it live on it.
    asio::io_context accepting{1};
    tcp::acceptor acceptor{accepting};
    std::vector<std::unique_ptr<Loop>> loops;
    std::unique_ptr<Workers> workers;
    std::unordered_map<Session*, std::pair<std::weak_ptr<Session>, Loop*>> sessions;
    size_t refusing = 0;  // sockets being answered 503 (over --max-connections)
    std::optional<Guard> guard;
    // Written by the accepting thread, read by the sessions (a request read after the drain began
    // gets Connection: close).
    std::atomic<bool> draining{false};

    void accept();
    void drain_now();
    // From a session's loop.
    void closed(Session* s) {
        asio::post(accepting, [this, s] {
            const auto it = sessions.find(s);
            if (it == sessions.end()) return;
            --it->second.second->connections;
            sessions.erase(it);
            maybe_finish();
        });
    }
    void maybe_finish() {
        if (!draining || !sessions.empty() || refusing != 0) return;
        guard.reset();
        for (auto& loop : loops) loop->guard.reset();
    }
    // The loop with the fewest connections among those whose thread is free: a loop running a
    // handler on its own thread (busy) is blocked for as long as the handler, a reload or a
    // compute slot's wait, and a new connection there would wait for all of it. Counting a busy
    // loop as one connection more let a tie send an echo to a loop held by a blocked handler
    // (HttpServer.ADrainAnswersTheRequestsAlreadyReadAndCloses timed out under ASan).
    Loop& least_loaded() {
        auto worse = [](const Loop& a, const Loop& b) {
            const bool a_busy = a.busy, b_busy = b.busy;
            return a_busy != b_busy ? a_busy : a.connections > b.connections;
        };
        Loop* best = loops.front().get();
        for (auto& loop : loops) {
            if (worse(*best, *loop)) best = loop.get();
        }
        return *best;
    }
};

namespace {

// One connection: wait for a request, read its headers and its body under their deadlines, run
// the handler, write the answer, and again while the connection is kept alive. Pipelined
// requests wait in `buffer_` and are answered in order, one at a time. Everything here runs on
// the thread of the socket's loop (the timer shares its executor).
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(HttpServer::Impl& server, HttpServer::Impl::Loop& loop, tcp::socket socket)
        : server_(server),
          loop_(loop),
          socket_(std::move(socket)),
          timer_(socket_.get_executor()) {}

    void start() {
        asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->next(); });
    }

    // On drain, from the accepting thread: runs on the session's loop.
    void drain() {
        asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->drain_here(); });
    }

  private:
    // On drain. An idle connection gets a second's grace: a keep-alive client
    // whose next request is already on its way gets it answered (with Connection: close)
    // instead of a reset. One reading a request gets at most --header-timeout more; one
    // computing or writing closes after its answer.
    void drain_here() {
        // Closed, its removal from the server's set still on its way: a timer armed now would
        // keep the loop running for nothing.
        if (closed_) return;
        const Clock::time_point now = Clock::now();
        if (state_ == State::kIdle) {
            arm(std::min(deadline_, now + kDrainGrace), "");
        } else if (state_ != State::kBusy) {  // reading, writing, or closing (2 s at most)
            arm(std::min(deadline_, now + seconds(server_.options.header_timeout)), timeout_why_);
        }
    }

    static constexpr std::chrono::seconds kDrainGrace{1};

    enum class State { kIdle, kReading, kBusy, kWriting, kClosing };

    // The deadline of the operation under way: when it passes the socket's operations are
    // cancelled and `timed_out_` says why.
    void arm(Clock::time_point deadline, std::string why) {
        deadline_ = deadline;
        timeout_why_ = std::move(why);
        timed_out_ = false;
        const uint64_t generation = ++generation_;
        timer_.expires_at(deadline);
        timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
            // Re-armed or cancelled (a completion already queued when it was re-armed carries
            // an older generation).
            if (ec || generation != self->generation_) return;
            self->timed_out_ = true;
            error_code ignored;
            self->socket_.cancel(ignored);
        });
    }
    void disarm() {
        ++generation_;
        timer_.cancel();
        deadline_ = Clock::time_point::max();
    }

    void next() {
        parser_.emplace();
        parser_->header_limit(server_.options.max_header);
        parser_->body_limit(server_.options.max_body);
        if (buffer_.size() > 0) return read_header();  // a pipelined request, already here
        state_ = State::kIdle;
        Clock::time_point deadline = Clock::now() + seconds(server_.options.idle_timeout);
        if (server_.draining) deadline = std::min(deadline, Clock::now() + kDrainGrace);
        arm(deadline, "");
        socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
            if (ec) return self->close_gracefully();
            self->read_header();
        });
    }

    void read_header() {
        state_ = State::kReading;
        const double t = server_.options.header_timeout;
        arm(Clock::now() + seconds(t), "request line and headers: not complete within " +
                                           format_seconds(t) + " s (--header-timeout)");
        http::async_read_header(
            socket_, buffer_, *parser_,
            [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
    }

    void on_header(error_code ec) {
        if (ec) return read_failed(ec);
        const auto& req = parser_->get();
        path_ = std::string(req.target());
        if (const size_t q = path_.find('?'); q != std::string::npos) path_.resize(q);
        if (path_.size() > 200) path_.resize(200);  // only for the metrics' label
        const bool has_body = parser_->chunked() || parser_->content_length().has_value();
        if (!has_body && req.method() == http::verb::post) length_missing_ = true;
        // Refusals decided by the headers alone; the body is not read, so the connection closes.
        const auto encoding = req.find(http::field::content_encoding);
        if (encoding != req.end() && !beast::iequals(encoding->value(), "identity")) {
            return refuse(415, "Content-Encoding " + quoted(std::string(encoding->value())) +
                                   ": not supported; send the body uncompressed");
        }
        const auto type = req.find(http::field::content_type);
        if (type != req.end() && beast::iequals(type->value().substr(0, 10), "multipart/")) {
            return refuse(415, "Content-Type " + quoted(std::string(type->value())) +
                                   ": expected a JSON body (application/json)");
        }
        if (parser_->content_length() && *parser_->content_length() > server_.options.max_body) {
            return refuse(400, "request body: " + std::to_string(*parser_->content_length()) +
                                   " bytes (Content-Length), over the limit of " +
                                   std::to_string(server_.options.max_body) +
                                   " bytes (--max-body)");
        }
        if (parser_->is_done()) return dispatch();
        const double t = server_.options.body_timeout;
        auto read_body = [self = shared_from_this(), t] {
            self->arm(Clock::now() + seconds(t), "request body: not complete within " +
                                                     format_seconds(t) + " s (--body-timeout)");
            http::async_read(self->socket_, self->buffer_, *self->parser_,
                             [self](error_code ec, size_t) {
                                 if (ec) return self->read_failed(ec);
                                 self->dispatch();
                             });
        };
        const auto expect = req.find(http::field::expect);
        if (expect != req.end() && beast::iequals(expect->value(), "100-continue")) {
            static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
            arm(Clock::now() + seconds(t), "");
            return asio::async_write(socket_, asio::buffer(kContinue),
                                     [self = shared_from_this(), read_body](error_code ec, size_t) {
                                         if (ec) return self->close_now();
                                         read_body();
                                     });
        }
        read_body();
    }

    // A read that did not give a complete request: a clean close between requests, a client
    // gone, a deadline, or a request HTTP cannot read (answered with the cause, then closed).
    void read_failed(error_code ec) {
        // The metrics' endpoint: the request line may have been read before the failure (a
        // Content-Length over --max-body fails while the headers are parsed).
        if (path_.empty()) {
            path_ = std::string(parser_->get().target());
            if (const size_t q = path_.find('?'); q != std::string::npos) path_.resize(q);
        }
        if (timed_out_) {
            if (timeout_why_.empty() || state_ != State::kReading) return close_now();
            return refuse(408, timeout_why_);
        }
        if (ec == http::error::end_of_stream || ec == asio::error::eof ||
            ec == http::error::partial_message || ec == asio::error::connection_reset ||
            ec == asio::error::operation_aborted || ec == asio::error::broken_pipe) {
            return close_now();
        }
        const uint32_t header_limit = server_.options.max_header;
        if (ec == http::error::header_limit) {
            return refuse(431, "request line and headers: over the limit of " +
                                   std::to_string(header_limit) + " bytes");
        }
        if (ec == http::error::body_limit) {
            return refuse(400, "request body: over the limit of " +
                                   std::to_string(server_.options.max_body) +
                                   " bytes (--max-body)");
        }
        if (ec == http::error::bad_chunk || ec == http::error::bad_chunk_extension) {
            return refuse(400,
                          "request body: malformed chunked encoding (a chunk size is hex "
                          "digits, then CRLF)");
        }
        if (ec == http::error::bad_content_length) {
            return refuse(400, "Content-Length header: expected one byte count (digits only)");
        }
        if (ec == http::error::bad_transfer_encoding) {
            return refuse(501, "Transfer-Encoding header: only chunked is supported");
        }
        if (ec == http::error::bad_method || ec == http::error::bad_target ||
            ec == http::error::bad_version) {
            return refuse(400, "request line: malformed (" + ec.message() +
                                   "); expected METHOD /path HTTP/1.1");
        }
        refuse(400, "request headers: malformed (" + ec.message() + ")");
    }

    void dispatch() {
        disarm();
        state_ = State::kBusy;
        auto& req = parser_->get();
        HttpRequest request;
        request.method = std::string(req.method_string());
        request.path = path_;
        request.body = std::move(req.body());
        request.length_missing = length_missing_;
        keep_alive_ = req.keep_alive() && !length_missing_;
        version_ = req.version();
        if (loop_.connections == 1) {  // alone on the loop: nobody waits for this thread
            loop_.busy = true;
            HttpResponse response = handle(request);
            loop_.busy = false;
            return write(std::move(response));
        }
        server_.workers->post([self = shared_from_this(), request = std::move(request)] {
            HttpResponse response = self->handle(request);
            asio::post(self->socket_.get_executor(),
                       [self, response = std::move(response)]() mutable {
                           self->write(std::move(response));
                       });
        });
    }

    // May block (a reload, a wait for a compute slot).
    HttpResponse handle(const HttpRequest& request) const {
        try {
            return server_.handler(request);
        } catch (...) {
            HttpResponse response;
            response.status = 500;
            response.body = server_.error_body("internal error");
            return response;
        }
    }

    // A request refused by the front end: the answer, then the connection closes (what follows
    // on it cannot be trusted to start a request).
    void refuse(int status, const std::string& message) {
        keep_alive_ = false;
        HttpResponse response;
        response.status = status;
        response.body = server_.error_body(message);
        write(std::move(response));
    }

    void write(HttpResponse response) {
        if (server_.draining) keep_alive_ = false;
        state_ = State::kWriting;
        status_ = response.status;
        auto res = std::make_shared<http::response<http::string_body>>(
            static_cast<http::status>(response.status), version_ == 10 ? 10 : 11);
        res->set(http::field::content_type, response.content_type);
        for (const auto& [name, value] : response.headers) res->set(name, value);
        res->body() = std::move(response.body);
        res->keep_alive(keep_alive_);
        res->prepare_payload();
        // The write shares the body's deadline: a client that does not read its answer is
        // dropped, not kept forever.
        Clock::time_point deadline = Clock::now() + seconds(server_.options.body_timeout);
        if (server_.draining) {
            deadline = std::min(deadline, Clock::now() + seconds(server_.options.header_timeout));
        }
        arm(deadline, "");
        // Counted before the write, not when it completes: a client that reads its answer and
        // then asks /metrics (on another loop) must find it counted, as its queries already are.
        server_.logger(path_, status_);
        http::async_write(socket_, *res, [self = shared_from_this(), res](error_code ec, size_t) {
            if (ec || !self->keep_alive_) return self->close_gracefully();
            self->length_missing_ = false;
            self->path_.clear();
            self->next();
        });
    }

    // Sends FIN, then reads and discards what the client still sends (at most 2 s): closing a
    // socket with unread bytes sends a reset, which can destroy the answer before the client
    // has read it.
    void close_gracefully() {
        if (state_ == State::kClosing) return;
        state_ = State::kClosing;
        error_code ignored;
        socket_.shutdown(tcp::socket::shutdown_send, ignored);
        arm(Clock::now() + std::chrono::seconds(2), "");
        discard();
    }
    void discard() {
        socket_.async_read_some(asio::buffer(scratch_),
                                [self = shared_from_this()](error_code ec, size_t) {
                                    if (ec) return self->close_now();
                                    self->discard();
                                });
    }
    void close_now() {
        if (closed_) return;
        closed_ = true;
        state_ = State::kClosing;
        disarm();
        error_code ignored;
        socket_.close(ignored);
        server_.closed(this);
    }

    HttpServer::Impl& server_;
    HttpServer::Impl::Loop& loop_;
    tcp::socket socket_;
    asio::steady_timer timer_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    State state_ = State::kIdle;
    Clock::time_point deadline_ = Clock::time_point::max();
    std::string timeout_why_;
    bool timed_out_ = false;
    uint64_t generation_ = 0;
    bool keep_alive_ = true, length_missing_ = false, closed_ = false;
    unsigned version_ = 11;
    int status_ = 0;
    std::string path_;
    std::array<char, 4096> scratch_{};
};

// Over --max-connections: 503 with Retry-After, then closed, at the cost of one small write.
// From the accepting thread; the refusal's own operations run on its socket's loop.
void refuse_connection(HttpServer::Impl& server, tcp::socket socket) {
    struct Refusal {
        tcp::socket socket;
        asio::steady_timer timer;
        std::string text;
        std::array<char, 4096> scratch{};
    };
    const std::string body = server.error_body(
        "too many connections: " + std::to_string(server.options.max_connections) +
        " are open (--connections); retry in a second");
    const auto executor = socket.get_executor();
    auto r = std::make_shared<Refusal>(Refusal{
        std::move(socket), asio::steady_timer(executor),
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: "
        "1\r\nConnection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body});
    ++server.refusing;
    auto done = [&server, r] {
        if (!r->socket.is_open()) return;
        error_code ignored;
        r->socket.close(ignored);
        r->timer.cancel();
        asio::post(server.accepting, [&server] {
            --server.refusing;
            server.maybe_finish();
        });
    };
    r->timer.expires_after(std::chrono::seconds(1));
    r->timer.async_wait([done](error_code ec) {
        if (!ec) done();
    });
    server.logger("", 503);  // counted before the write, as every answer (Session::write)
    asio::async_write(r->socket, asio::buffer(r->text), [r, done](error_code ec, size_t) {
        if (ec) return done();
        error_code ignored;
        r->socket.shutdown(tcp::socket::shutdown_send, ignored);
        // Read what the client sent until it closes or the second is over.
        auto drain = std::make_shared<std::function<void()>>();
        *drain = [r, done, drain] {
            r->socket.async_read_some(asio::buffer(r->scratch),
                                      [done, drain](error_code e, size_t) {
                                          if (e) {
                                              done();
                                              *drain = nullptr;  // breaks the cycle
                                              return;
                                          }
                                          (*drain)();
                                      });
        };
        (*drain)();
    });
}

}  // namespace

void HttpServer::Impl::accept() {
    Loop& target = least_loaded();
    acceptor.async_accept(target.context, [this, &target](error_code ec, tcp::socket socket) {
        if (draining) return;
        if (ec) {
            if (ec == asio::error::operation_aborted) return;
            // Out of file descriptors (EMFILE) or another passing failure: try again shortly
            // rather than spin.
            auto timer =
                std::make_shared<asio::steady_timer>(accepting, std::chrono::milliseconds(50));
            timer->async_wait([this, timer](error_code) {
                if (!draining) accept();
            });
            return;
        }
        error_code ignored;
        // An answer is written as headers and body: with Nagle's algorithm the body waited for
        // the client's delayed ACK, 40 ms per request (measured with the previous front end).
        socket.set_option(tcp::no_delay(true), ignored);
        if (sessions.size() >= options.max_connections) {
            // A flood of refusals costs a write and a socket for up to a second each, but not
            // without bound. Bounded by --connections before, which let 4 stalled refusals turn
            // every further client away unanswered for a second (curl exits 52 and 56).
            if (refusing < options.max_refusals) {
                refuse_connection(*this, std::move(socket));
            } else {
                socket.close(ignored);
            }
        } else {
            auto session = std::make_shared<Session>(*this, target, std::move(socket));
            sessions.emplace(session.get(), std::make_pair(session, &target));
            ++target.connections;
            session->start();
        }
        accept();
    });
}

std::string format_seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s);
    return buf;
}

void HttpServer::Impl::drain_now() {
    if (draining) return;
    draining = true;
    error_code ignored;
    acceptor.close(ignored);
    std::vector<std::shared_ptr<Session>> open;
    for (auto& [raw, entry] : sessions) {
        if (auto s = entry.first.lock()) open.push_back(std::move(s));
    }
    for (auto& s : open) s->drain();
    maybe_finish();
}

HttpServer::HttpServer(HttpOptions options, Handler handler, Logger logger, ErrorBody error_body)
    : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
    impl_->handler = std::move(handler);
    impl_->logger = std::move(logger);
    impl_->error_body = std::move(error_body);
    const HttpOptions& o = impl_->options;
    const std::string where = o.host + ":" + std::to_string(o.port);
    error_code ec;
    tcp::resolver resolver(impl_->accepting);
    const auto endpoints =
        resolver.resolve(o.host, std::to_string(o.port),
                         tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || endpoints.empty()) {
        throw Error(ErrorCategory::kIo,
                    "cannot listen on " + where + ": not an address (" + ec.message() + ")");
    }
    const tcp::endpoint endpoint = endpoints.begin()->endpoint();
    tcp::acceptor& a = impl_->acceptor;
    a.open(endpoint.protocol(), ec);
    // SO_REUSEADDR only (a restart may bind while old connections linger in TIME_WAIT); never
    // SO_REUSEPORT, which let a second server share a port already served without a word.
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(endpoint, ec);
    // The kernel's largest backlog: with a backlog of 5, 64 clients connecting at once lost
    // SYNs and retried 1 to 7 s later (benchmarks/results/
    // 2026-11-26-vm-serve-batch256-before-backlog.json).
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        throw Error(ErrorCategory::kIo, "cannot listen on " + where + " (" + ec.message() +
                                            ": address in use, or not an address of this "
                                            "machine)");
    }
}

HttpServer::~HttpServer() = default;

uint16_t HttpServer::port() const {
    error_code ec;
    return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::run() {
    Impl& impl = *impl_;
    for (int i = 0; i < std::max(1, impl.options.workers); ++i) {
        impl.loops.push_back(std::make_unique<Impl::Loop>());
        impl.loops.back()->guard.emplace(impl.loops.back()->context.get_executor());
    }
    impl.workers = std::make_unique<Workers>(impl.options.workers);
    impl.guard.emplace(impl.accepting.get_executor());
    impl.accept();
    // Every loop returns when the drain has closed every connection (the guards are gone and no
    // operation is left), or at once when one of them failed.
    std::mutex failure_mutex;
    std::exception_ptr failure;
    auto serve = [&](asio::io_context& context) {
        try {
            context.run();
        } catch (...) {
            {
                std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
            }
            impl.accepting.stop();
            for (auto& loop : impl.loops) loop->context.stop();
        }
    };
    std::vector<std::thread> threads;
    for (auto& loop : impl.loops) threads.emplace_back(serve, std::ref(loop->context));
    serve(impl.accepting);
    for (std::thread& t : threads) t.join();
    // Every session is closed: no task is left in the workers (a session closes only after the
    // worker's answer was posted back and written).
    impl.workers.reset();
    if (failure) std::rethrow_exception(failure);
}

void HttpServer::drain() {
    asio::post(impl_->accepting, [impl = impl_.get()] { impl->drain_now(); });
}

}  // namespace sparsenet::cli::serve

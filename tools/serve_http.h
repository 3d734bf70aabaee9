// sparsenet serve: the HTTP front end (Boost.Beast on Boost.Asio, header-only, Debian's
// libboost-dev). `workers` event loops, a thread each, hold the connections (one more thread
// accepts them and gives each to the least-loaded loop): a loop reads requests (headers, then
// body, each under its own deadline), answers what HTTP itself refuses, and runs the handler on
// its own thread when the connection is alone on it, else on a pool of `workers` threads (the loop
// writes the answer). A slow, idle or half-open client costs a socket and a buffer, never a
// thread. docs/serving.md, "Connections".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sparsenet::cli::serve {

struct HttpRequest {
    std::string method;  // "GET", "POST", ...
    std::string path;    // the target without its query string
    std::string body;
    // A POST with neither Content-Length nor Transfer-Encoding: chunked. Its body is empty (RFC
    // 9112, 6.3), the connection closes after the answer (bytes sent after the headers would
    // otherwise be read as the next request), and endpoints that need a body say so (411).
    bool length_missing = false;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // more headers (Allow, ...)
};

struct HttpOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 8080;           // 0: any free port (HttpServer::port() says which)
    size_t max_connections = 1024;  // open at once; more are answered 503 and closed
    // 503s in flight at once: each holds its socket for up to a second after the answer, reading
    // what the client sends so that closing does not reset the connection before the client
    // reads the 503. A flood beyond this many within that second is closed unanswered.
    size_t max_refusals = 1024;
    int workers = 8;               // event loops, and threads for connections sharing one
    size_t max_body = 1 << 20;     // bytes
    uint32_t max_header = 8192;    // request line and headers, bytes
    double idle_timeout = 60.0;    // s: a kept-alive connection waiting for its next request
    double header_timeout = 10.0;  // s: from a request's first byte to the end of its headers
    double body_timeout = 30.0;    // s: the body, after the headers (and writing an answer)
};

class HttpServer {
  public:
    // Runs on a loop's or a worker's thread, on many at once; may block (a reload, a wait for a
    // compute slot).
    using Handler = std::function<HttpResponse(const HttpRequest&)>;
    // Every answer about to be written, the handler's and the front end's own refusals (path ""
    // when the request line was not read); called before the write starts.
    using Logger = std::function<void(const std::string& path, int status)>;
    // The body of the front end's own refusals.
    using ErrorBody = std::function<std::string(const std::string& message)>;

    // Binds and listens (throws sparsenet::Error, kIo, when it cannot); serves nothing before
    // run().
    HttpServer(HttpOptions options, Handler handler, Logger logger, ErrorBody error_body);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    uint16_t port() const;

    // Serves until drain() has closed every connection; then returns. Call once.
    void run();

    // From any thread: stop accepting, close idle connections, answer every request already
    // read (Connection: close), drop requests still arriving after --header-timeout.
    void drain();

    struct Impl;  // serve_http.cpp: the loops, the sessions, the workers

  private:
    std::unique_ptr<Impl> impl_;
};

// Seconds as the help and the messages write them ("%g": 30, 0.5).
std::string format_seconds(double s);

}  // namespace sparsenet::cli::serve

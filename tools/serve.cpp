// sparsenet serve: a Recommender behind HTTP (Boost.Beast: tools/serve_http.h; JSON by JsonCpp).
// docs/serving.md.
//
// Threads: --workers event loops hold the connections (--connections; tools/serve_http.h) and read
// requests, answering a connection alone on its loop on the loop's thread and handing those of
// loops with several to a pool of --workers threads; computation goes through a gate of --threads
// slots (cores) in arrival order, a request on one core, or on all the free ones when nobody waits
// (a screened model's scan splits over them); single queries waiting together are ranked as one
// group (tools/grouping_gate.h, --group). The model is a std::shared_ptr swapped atomically: each
// request copies it once, so a reload never changes the model under a request in flight, and the
// old model is freed by the last request that holds it. Loads (the first, POST /reload, SIGHUP)
// run on one loader thread. Signals only write a byte to a pipe (self-pipe); a watcher thread does
// the work.
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "args.h"
#include "common.h"
#include "grouping_gate.h"
#include "serve_http.h"
#include "serve_request.h"
#include "sparsenet/device_choice.h"
#include "sparsenet/error.h"
#include "sparsenet/model_info.h"
#include "sparsenet/recommender.h"

namespace sparsenet::cli {
namespace {

using Clock = std::chrono::steady_clock;

void log_line(const std::string& line) {
    std::fprintf(stderr, "sparsenet serve: %s\n", line.c_str());
    std::fflush(stderr);
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- the model ----

struct Model {
    std::shared_ptr<const Recommender> recommender;
    uint64_t version = 0;       // 1 for the first load, +1 per successful reload
    double load_seconds = 0.0;  // how long this load took
    double loaded_at = 0.0;     // Unix time
};

// Holds the current model and loads new ones on its own thread. request() asks for a load (of
// the same path: the file replaced in place, or renamed over) and returns a ticket; wait(ticket)
// returns the outcome of the load that covered it. Requests made during a load are served by
// one load after it (a burst of SIGHUPs loads once more, not once per signal).
class ModelHolder {
  public:
    struct Outcome {
        bool ok = false;
        std::string error;
        uint64_t version = 0;  // the version serving after this load
        double seconds = 0.0;
    };

    ModelHolder(std::string path, RecommenderOptions options, std::string screening)
        : path_(std::move(path)), options_(std::move(options)), screening_(std::move(screening)) {
        loader_ = std::thread([this] { loop(); });
    }
    ~ModelHolder() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        changed_.notify_all();
        loader_.join();
    }

    std::shared_ptr<const Model> current() const { return std::atomic_load(&model_); }

    uint64_t request() {
        std::lock_guard<std::mutex> lock(mutex_);
        changed_.notify_all();
        return ++requested_;
    }

    Outcome wait(uint64_t ticket) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return completed_ >= ticket; });
        return last_;
    }

    uint64_t reloads_ok() const { return reloads_ok_; }
    uint64_t reloads_failed() const { return reloads_failed_; }

  private:
    // The Recommender; with --fp16-screening auto, screening when the model allows it. A
    // screened model's scan may split over every core (the gate gives a request all the free
    // cores when nobody waits behind it); an unscreened model computes each request on one core
    // (a team's barriers in its products would cost more than they save).
    std::shared_ptr<const Recommender> load() const {
        const int cores = options_.max_concurrent_calls;
        RecommenderOptions o = options_;
        auto screened = [&](bool on) {
            o.fp16_screening = on;
            o.threads_per_call = on ? cores : 1;
        };
        screened(screening_ != "off");
        // A SoftMax output layer screened answers logits, not probabilities: only when asked
        // (--fp16-screening on); auto keeps its probabilities.
        if (screening_ == "auto" && ranks_softmax()) screened(false);
        try {
            return std::make_shared<const Recommender>(path_, o);
        } catch (const Error& e) {
            // Screening needs one dense source and an element-wise activation or SoftMax:
            // other models are served with the full product.
            const bool unsupported =
                e.category() == ErrorCategory::kUsage &&
                std::string(e.what()).find("fp16_screening") != std::string::npos;
            if (screening_ != "auto" || !unsupported) throw;
            screened(false);
            return std::make_shared<const Recommender>(path_, o);
        }
    }

    // Whether the layer served is a SoftMax one (the model file's config, no weights read).
    bool ranks_softmax() const {
        const NetworkConfig config = read_model_info(path_).config;
        for (const LayerConfig& l : config.layers) {
            const bool served = options_.output_layer.empty() ? l.kind == LayerKind::kOutput
                                                              : l.name == options_.output_layer;
            if (served) return l.activation == Activation::kSoftMax;
        }
        return false;
    }

    void loop() {
        for (;;) {
            uint64_t target = 0;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                changed_.wait(lock, [&] { return stop_ || requested_ > completed_; });
                if (stop_) return;
                target = requested_;
            }
            Outcome outcome;
            const auto start = Clock::now();
            try {
                std::shared_ptr<const Recommender> r = load();
                auto model = std::make_shared<Model>();
                model->recommender = std::move(r);
                model->load_seconds = seconds_since(start);
                // To the millisecond (a gauge printed with 9 digits had a 10 s resolution).
                model->loaded_at = std::chrono::duration<double>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count();
                // Before the model is published: the kernel's probe may take milliseconds, and a
                // client that sees the new model may read the log.
                const std::string kernel =
                    model->recommender->device() == "cpu" &&
                            model->recommender->precision() == Precision::kBf16
                        ? "; " + cpu_bf16_kernel_line()
                        : std::string();
                const std::shared_ptr<const Model> old = current();
                model->version = old ? old->version + 1 : 1;
                std::atomic_store(&model_, std::shared_ptr<const Model>(std::move(model)));
                const std::shared_ptr<const Model> now = current();
                outcome.ok = true;
                outcome.version = now->version;
                outcome.seconds = now->load_seconds;
                ++reloads_ok_;
                log_line("loaded " + path_ + " as model version " + std::to_string(now->version) +
                         " in " + std::to_string(now->load_seconds) + " s: " +
                         std::to_string(now->recommender->input_items()) + " input items, " +
                         std::to_string(now->recommender->output_items()) + " output items" +
                         (now->recommender->screening() ? ", fp16 screening" : "") +
                         (now->recommender->ann()
                              ? ", ANN index " + options_.ann_index + " (" +
                                    std::to_string(now->recommender->ann_memory_bytes()) +
                                    " bytes with its re-ranking vectors)"
                              : std::string()) +
                         (options_.bf16_input_weights ? ", BF16 input weights" : "") + kernel +
                         (now->recommender->released_bytes()
                              ? "; " + std::to_string(now->recommender->released_bytes()) +
                                    " bytes of weights released"
                              : std::string()));
            } catch (const std::bad_alloc&) {
                outcome.error = path_ + ": " + host_out_of_memory_message();
            } catch (const std::exception& e) {
                outcome.error = e.what();
            }
            if (!outcome.ok) {
                ++reloads_failed_;
                const std::shared_ptr<const Model> old = current();
                outcome.version = old ? old->version : 0;
                outcome.seconds = seconds_since(start);
                log_line("load refused: " + outcome.error +
                         (old ? "; still serving model version " + std::to_string(old->version)
                              : std::string()));
            }
            {
                std::lock_guard<std::mutex> lock(mutex_);
                completed_ = target;
                last_ = outcome;
            }
            changed_.notify_all();
        }
    }

    const std::string path_;
    const RecommenderOptions options_;
    const std::string screening_;
    std::shared_ptr<const Model> model_;  // read and written with std::atomic_load/store
    std::mutex mutex_;
    std::condition_variable changed_;
    uint64_t requested_ = 0, completed_ = 0;
    bool stop_ = false;
    Outcome last_;
    std::atomic<uint64_t> reloads_ok_{0}, reloads_failed_{0};
    std::thread loader_;
};

// ---- metrics ----

// Counters for GET /metrics (Prometheus text format 0.0.4).
class Metrics {
  public:
    // Upper bounds of the latency histogram, in seconds: a single query takes about 1 ms on the
    // ML-20M shape (docs/benchmarks.md), a batch of 256 about 70 ms.
    static constexpr std::array<double, 14> kBuckets = {
        0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0};

    void count(const std::string& endpoint, int status) {
        std::lock_guard<std::mutex> lock(mutex_);
        ++requests_[{endpoint, status}];
    }

    // ann: the queries were answered from an ANN index (--ann).
    void observe(const std::string& endpoint, double seconds, size_t queries, bool ann) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (ann) ann_queries_ += queries;
        Histogram& h = latency_[endpoint];
        for (size_t b = 0; b < kBuckets.size(); ++b) {
            if (seconds <= kBuckets[b]) ++h.buckets[b];
        }
        ++h.count;
        h.sum += seconds;
        queries_[endpoint] += queries;
    }

    // groups: single-query groups run and the queries they held (GroupingGate::groups()).
    std::string text(const ModelHolder& holder, std::pair<uint64_t, uint64_t> groups) const {
        std::string out;
        auto line = [&](const std::string& s) { out += s + "\n"; };
        auto number = [](double v) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.9g", v);
            return std::string(buf);
        };
        std::lock_guard<std::mutex> lock(mutex_);
        line("# HELP sparsenet_requests_total HTTP requests answered, by endpoint and status.");
        line("# TYPE sparsenet_requests_total counter");
        for (const auto& [key, n] : requests_) {
            line("sparsenet_requests_total{endpoint=\"" + key.first + "\",status=\"" +
                 std::to_string(key.second) + "\"} " + std::to_string(n));
        }
        line(
            "# HELP sparsenet_queries_total Queries answered (a batch counts each of its "
            "queries).");
        line("# TYPE sparsenet_queries_total counter");
        for (const auto& [endpoint, n] : queries_) {
            line("sparsenet_queries_total{endpoint=\"" + endpoint + "\"} " + std::to_string(n));
        }
        line(
            "# HELP sparsenet_request_duration_seconds Time from a request's body read to its "
            "answer, of the answered queries (status 200).");
        line("# TYPE sparsenet_request_duration_seconds histogram");
        for (const auto& [endpoint, h] : latency_) {
            const std::string label = "endpoint=\"" + endpoint + "\"";
            for (size_t b = 0; b < kBuckets.size(); ++b) {
                line("sparsenet_request_duration_seconds_bucket{" + label + ",le=\"" +
                     number(kBuckets[b]) + "\"} " + std::to_string(h.buckets[b]));
            }
            line("sparsenet_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " +
                 std::to_string(h.count));
            line("sparsenet_request_duration_seconds_sum{" + label + "} " + number(h.sum));
            line("sparsenet_request_duration_seconds_count{" + label + "} " +
                 std::to_string(h.count));
        }
        line(
            "# HELP sparsenet_query_groups_total Groups of concurrent single queries ranked "
            "together (a query alone counts as a group of one; --group).");
        line("# TYPE sparsenet_query_groups_total counter");
        line("sparsenet_query_groups_total " + std::to_string(groups.first));
        line("# HELP sparsenet_grouped_queries_total Single queries ranked in those groups.");
        line("# TYPE sparsenet_grouped_queries_total counter");
        line("sparsenet_grouped_queries_total " + std::to_string(groups.second));
        line(
            "# HELP sparsenet_ann_queries_total Queries answered from the ANN index (--ann): "
            "candidates from the index, ranked exactly.");
        line("# TYPE sparsenet_ann_queries_total counter");
        line("sparsenet_ann_queries_total " + std::to_string(ann_queries_));
        const std::shared_ptr<const Model> model = holder.current();
        line(
            "# HELP sparsenet_model_version Version of the model serving: 1 for the first "
            "load, +1 per successful reload; 0 while the first load runs.");
        line("# TYPE sparsenet_model_version gauge");
        line("sparsenet_model_version " + std::to_string(model ? model->version : 0));
        line("# HELP sparsenet_model_load_seconds How long the serving model took to load.");
        line("# TYPE sparsenet_model_load_seconds gauge");
        line("sparsenet_model_load_seconds " + number(model ? model->load_seconds : 0.0));
        line(
            "# HELP sparsenet_model_loaded_timestamp_seconds When the serving model was loaded "
            "(Unix time).");
        line("# TYPE sparsenet_model_loaded_timestamp_seconds gauge");
        char stamp[64];
        std::snprintf(stamp, sizeof stamp, "%.3f", model ? model->loaded_at : 0.0);
        line("sparsenet_model_loaded_timestamp_seconds " + std::string(stamp));
        line(
            "# HELP sparsenet_model_loads_total Model loads (the first one and reloads), by "
            "result; a failed one leaves the previous model serving.");
        line("# TYPE sparsenet_model_loads_total counter");
        line("sparsenet_model_loads_total{result=\"ok\"} " + std::to_string(holder.reloads_ok()));
        line("sparsenet_model_loads_total{result=\"failed\"} " +
             std::to_string(holder.reloads_failed()));
        return out;
    }

  private:
    struct Histogram {
        std::array<uint64_t, kBuckets.size()> buckets{};
        uint64_t count = 0;
        double sum = 0.0;
    };
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, Histogram> latency_;
    std::map<std::string, uint64_t> queries_;
    uint64_t ann_queries_ = 0;
};

// ---- signals: a self-pipe ----

int g_signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
    const int saved = errno;
    const char byte = sig == SIGHUP ? 'H' : 'T';
    [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &byte, 1);
    errno = saved;
}

void install_signal_handlers() {
    if (pipe(g_signal_pipe) != 0) {
        throw Error(ErrorCategory::kInternal, "serve: pipe() for the signal handler failed");
    }
    for (int fd : g_signal_pipe) fcntl(fd, F_SETFD, FD_CLOEXEC);
    // A full pipe drops the byte instead of blocking the handler.
    fcntl(g_signal_pipe[1], F_SETFL, O_NONBLOCK);
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int sig : {SIGHUP, SIGTERM, SIGINT}) sigaction(sig, &action, nullptr);
    // A client that closes its connection mid-answer must not end the process.
    signal(SIGPIPE, SIG_IGN);
}

// ---- the service ----

// The endpoints, written once: routes, metrics labels, the 404's text and --help read them.
struct Endpoint {
    const char* path;
    const char* method;
};
constexpr Endpoint kEndpoints[] = {{"/recommend", "POST"},
                                   {"/recommend/batch", "POST"},
                                   {"/reload", "POST"},
                                   {"/health", "GET"},
                                   {"/metrics", "GET"}};

// "POST /recommend, POST /recommend/batch, ... <last_separator>GET /metrics".
std::string endpoint_list(const char* last_separator) {
    std::string s;
    const size_t n = std::size(kEndpoints);
    for (size_t i = 0; i < n; ++i) {
        if (i > 0) s += i + 1 == n ? last_separator : ", ";
        s += std::string(kEndpoints[i].method) + " " + kEndpoints[i].path;
    }
    return s;
}

// Known endpoints keep their name in the metrics; anything else counts as "other" (a label per
// path a scanner tries would grow without bound).
std::string endpoint_label(const std::string& path) {
    for (const Endpoint& e : kEndpoints) {
        if (path == e.path) return e.path;
    }
    return "other";
}

struct ServeOptions {
    serve::RequestLimits limits;
    int slots = 1;         // cores computed on (--threads): one per request, or all of them
    size_t max_group = 1;  // single queries ranked together at most (--group)
};

using Gate = serve::GroupingGate<const Recommender*, Query, Recommendations>;

// A group's answers: one recommend_batch (one fp16 scan for the group; exactly recommend()'s
// answers when the Recommender screens, which is when queries are grouped).
std::vector<Recommendations> run_group(const Recommender* const& r,
                                       const std::vector<const Query*>& group, int threads) {
    if (group.size() == 1 && !r->screening()) {
        return {r->recommend(group[0]->items, group[0]->options)};
    }
    std::vector<Query> queries;
    queries.reserve(group.size());
    for (const Query* q : group) queries.push_back(*q);
    return r->recommend_batch(queries, threads);
}

class Service {
  public:
    Service(ModelHolder& holder, ServeOptions options)
        : holder_(holder), options_(options), gate_(options.slots, options.max_group, run_group) {}

    // One request, on a worker thread.
    serve::HttpResponse handle(const serve::HttpRequest& req) {
        serve::HttpResponse res;
        const Endpoint* route = nullptr;
        for (const Endpoint& e : kEndpoints) {
            if (req.path == e.path) route = &e;
        }
        if (route == nullptr) {
            res.status = 404;
            res.body = serve::error_json("no endpoint " + serve::quoted(req.path) + "; expected " +
                                         endpoint_list(" or "));
            return res;
        }
        // HEAD is not served: its answer would need the GET's headers without the body.
        if (req.method != route->method) {
            res.status = 405;
            res.headers.push_back({"Allow", route->method});
            res.body = serve::error_json("method " + serve::quoted(req.method) + " on " +
                                         route->path + ": expected " + route->method);
            return res;
        }
        const std::string path = route->path;
        if (path == "/health") return health();
        if (path == "/metrics") {
            res.content_type = "text/plain; version=0.0.4";
            res.body = metrics_.text(holder_, gate_.groups());
            return res;
        }
        if (path == "/reload") return reload();
        if (req.length_missing) {
            res.status = 411;
            res.body = serve::error_json(
                "request body: a POST to " + path +
                " needs a Content-Length header (or Transfer-Encoding: chunked); curl -d sends "
                "one");
            return res;
        }
        if (path == "/recommend") {
            answer("/recommend", req, res,
                   [this](const Json::Value& body, const Recommender& r, size_t* queries) {
                       const Query q = serve::parse_query(body, options_.limits);
                       // Grouped only when the answers stay recommend()'s bit for bit.
                       Json::Value out =
                           serve::to_json(gate_.single(&r, q, r.screening(), team(r)));
                       *queries = 1;
                       return out;
                   });
        } else {
            answer("/recommend/batch", req, res,
                   [this](const Json::Value& body, const Recommender& r, size_t* queries) {
                       const std::vector<Query> qs = serve::parse_batch(body, options_.limits);
                       Json::Value out(Json::objectValue);
                       Json::Value& results = out["results"] = Json::Value(Json::arrayValue);
                       const std::vector<Recommendations> answers =
                           gate_.alone([&](int t) { return r.recommend_batch(qs, t); }, team(r));
                       for (const Recommendations& recs : answers) {
                           results.append(serve::to_json(recs));
                       }
                       *queries = qs.size();
                       return out;
                   });
        }
        return res;
    }

    void count(const std::string& path, int status) {
        metrics_.count(endpoint_label(path), status);
    }

  private:
    serve::HttpResponse health() {
        serve::HttpResponse res;
        const std::shared_ptr<const Model> model = holder_.current();
        Json::Value v(Json::objectValue);
        if (!model) {
            v["status"] = "loading";
            res.status = 503;
        } else {
            v["status"] = "ready";
            v["model_version"] = Json::UInt64(model->version);
            v["input_items"] = model->recommender->input_items();
            v["output_items"] = model->recommender->output_items();
        }
        res.body = serve::write_json(v);
        return res;
    }

    serve::HttpResponse reload() {
        serve::HttpResponse res;
        const ModelHolder::Outcome outcome = holder_.wait(holder_.request());
        Json::Value v(Json::objectValue);
        v["model_version"] = Json::UInt64(outcome.version);
        v["load_seconds"] = outcome.seconds;
        if (!outcome.ok) {
            v["error"] = "reload refused: " + outcome.error +
                         (outcome.version > 0
                              ? "; still serving model version " + std::to_string(outcome.version)
                              : std::string());
            res.status = 500;
        }
        res.body = serve::write_json(v);
        return res;
    }

    // The threads a request on `r` may take: all the cores for a screened model (ModelHolder).
    int team(const Recommender& r) const { return r.screening() ? gate_.slots() : 1; }

    template <class F>
    void answer(const char* endpoint, const serve::HttpRequest& req, serve::HttpResponse& res,
                F&& compute) {
        const auto start = Clock::now();
        // One copy per request: a reload swapping the model meanwhile leaves this one alive.
        const std::shared_ptr<const Model> model = holder_.current();
        size_t queries = 0;
        try {
            if (!model) {
                res.status = 503;
                res.headers.push_back({"Retry-After", "1"});
                res.body = serve::error_json(
                    "the model is still loading; retry when GET /health answers 200");
                return;
            }
            const Json::Value body = serve::parse_json(req.body);
            Json::Value out;
            {
                // One core per request: a batch's OpenBLAS product takes the calling thread's
                // OpenMP threads, and --threads requests at once each with a team would
                // oversubscribe the cores (an OpenMP barrier waiting for a descheduled thread:
                // docs/benchmarks.md, "Library").
                thread_local const bool one_thread = [] {
                    omp_set_num_threads(1);
                    return true;
                }();
                (void)one_thread;
                out = compute(body, *model->recommender, &queries);  // through gate_
            }
            res.body = serve::write_json(out);
            metrics_.observe(endpoint, seconds_since(start), queries, model->recommender->ann());
        } catch (const serve::BadRequest& e) {
            res.status = 400;
            res.body = serve::error_json(e.what());
        } catch (const Error& e) {
            // The Recommender's refusals of a query (unknown items without ignore_unknown, a
            // name given to a model without names) are the client's; anything else is ours.
            const bool client =
                e.category() == ErrorCategory::kUsage || e.category() == ErrorCategory::kData;
            res.status = client ? 400 : 500;
            res.body = serve::error_json(e.what());
            if (!client) log_line(std::string("error answering ") + endpoint + ": " + e.what());
        } catch (const std::bad_alloc&) {
            res.status = 503;
            res.body = serve::error_json("out of memory answering this request");
        } catch (const std::exception& e) {
            res.status = 500;
            res.body = serve::error_json(std::string("internal error: ") + e.what());
            log_line(std::string("error answering ") + endpoint + ": " + e.what());
        }
    }

    ModelHolder& holder_;
    const ServeOptions options_;
    Gate gate_;
    Metrics metrics_;
};

}  // namespace

int serve_main(int argc, char** argv) {
    return run_command("serve", [&]() {
        std::string model_path, features_index, host = "127.0.0.1", screening = "auto", ann;
        uint32_t ann_probe = 0, ann_fetch = 0;
        uint32_t port = 8080, max_batch = 256, max_k = 1000, connections = 0, group = 16;
        uint32_t workers = 0;
        uint64_t max_body = 1 << 20;
        int threads = 0;
        double idle_timeout = 60, header_timeout = 10, body_timeout = 30;
        ArgParser args("serve",
                       "Answers recommendation queries over HTTP: " + endpoint_list(", ") +
                           " (docs/serving.md). SIGHUP reloads the model file; SIGTERM answers "
                           "the requests already read, closes the connections and exits 0.");
        args.add({"-n", "--model"}, &model_path, "FILE.nc", "model file written by train", true);
        args.add({"--features-index"}, &features_index, "FILE",
                 "item names ('label<TAB>index'); default: the names the model carries, else "
                 "items are ids only");
        args.add({"--host"}, &host, "ADDR", "address to listen on (default 127.0.0.1)");
        args.add({"--port"}, &port, "PORT", "port (default 8080; 0: any free port, printed)");
        args.add({"--threads"}, &threads, "N",
                 "cores to compute on (default: all): up to N requests at once, one core each, "
                 "or one on all N when nobody waits (fp16 screening); others wait their turn, "
                 "in arrival order");
        args.add({"--connections"}, &connections, "N",
                 "connections open at once (default 1024, or what ulimit -n allows); more are "
                 "answered 503 with "
                 "Retry-After and closed. An open connection costs a socket, not a thread");
        args.add({"--workers"}, &workers, "N",
                 "event loops holding the connections, and threads answering the requests of "
                 "connections that share a loop (default: --threads x (2 x --group + 1), at "
                 "least 8, at most 1024); requests beyond them wait in arrival order");
        args.add({"--idle-timeout"}, &idle_timeout, "S",
                 "seconds a kept-alive connection may wait for its next request (default 60)");
        args.add({"--header-timeout"}, &header_timeout, "S",
                 "seconds from a request's first byte to the end of its headers (default 10); "
                 "also bounds the drain on SIGTERM");
        args.add({"--body-timeout"}, &body_timeout, "S",
                 "seconds to read a request's body after its headers, and to write an answer "
                 "(default 30)");
        args.add({"--max-batch"}, &max_batch, "B",
                 "most queries of one /recommend/batch request, scored as one product "
                 "(default 256)");
        args.add({"--group"}, &group, "G",
                 "most concurrent single queries ranked together by one scan of the output "
                 "layer, while every --threads slot is busy (default 16; 1: each alone); needs "
                 "fp16 screening, which keeps the answers exactly those of a query alone");
        args.add({"--max-k"}, &max_k, "K", "largest k a query may ask (default 1000)");
        args.add({"--max-body"}, &max_body, "BYTES",
                 "largest request body (default 1048576); larger ones get 400");
        args.add({"--fp16-screening"}, &screening, "MODE",
                 "auto | on | off: rank single queries by an fp16 scan of the output layer (the "
                 "same results; docs/library.md). auto: when the model allows it (default)");
        std::string precision;
        bool bf16_weights_only = false;
        args.add({"--precision"}, &precision, "P", kPrecisionHelp);
        args.add_flag({"--bf16-weights-only"}, &bf16_weights_only,
                      "with --precision bf16 (or a bf16 model): keep only the BF16 copies of "
                      "the weights the products read (half their memory, the same answers; "
                      "no fp16 screening)");
        bool bf16_input_weights = false;
        args.add_flag({"--bf16-input-weights"}, &bf16_input_weights,
                      "keep the sparse input layer's weights in BF16 only (half their memory; "
                      "scores those of the model with them rounded to BF16; any precision, with "
                      "--ann too)");
        args.add({"--ann"}, &ann, "FILE.ann",
                 "answer from this ANN index (`sparsenet ann-index`): candidates from the index, "
                 "ranked exactly; must have been built from the model (else the load fails "
                 "naming it); replaces fp16 screening");
        args.add({"--ann-probe"}, &ann_probe, "N",
                 "the ANN index's accuracy knob: the cells scanned (ivf) or efSearch, the "
                 "candidate list of a search (hnsw); default: the file's");
        args.add({"--ann-fetch"}, &ann_fetch, "N",
                 "candidates taken from the ANN index per query before filtering (default "
                 "max(k, --ann-probe))");
        if (!args.parse(argc, argv)) return 0;
        const std::optional<Precision> precision_choice = precision_option(precision);
        if (bf16_weights_only && screening == "on") {
            throw Error(ErrorCategory::kUsage,
                        "--bf16-weights-only and --fp16-screening on exclude each other (the "
                        "fp16 copy is made from the FP32 weights)");
        }
        if (bf16_weights_only) screening = "off";
        if (ann.empty() && (ann_probe != 0 || ann_fetch != 0)) {
            throw Error(ErrorCategory::kUsage,
                        "options --ann-probe and --ann-fetch need --ann FILE (an ANN index)");
        }
        if (!ann.empty() && access(ann.c_str(), R_OK) != 0) {
            throw Error(ErrorCategory::kIo,
                        "option --ann: cannot read the ANN index '" + ann + "' (" +
                            std::strerror(errno) + "); build it with sparsenet ann-index -n " +
                            (model_path.empty() ? "MODEL" : model_path) + " -o " + ann);
        }
        if (port > 65535) {
            throw Error(ErrorCategory::kUsage,
                        "option --port: " + std::to_string(port) + " is not a port (0..65535)");
        }
        if (screening != "auto" && screening != "on" && screening != "off") {
            throw Error(ErrorCategory::kUsage,
                        "option --fp16-screening: '" + screening + "' is not auto, on or off");
        }
        for (const auto& [flag, value] :
             {std::pair<const char*, uint64_t>{"--max-batch", max_batch},
              {"--max-k", max_k},
              {"--group", group},
              {"--max-body", max_body}}) {
            if (value == 0) {
                throw Error(ErrorCategory::kUsage,
                            std::string("option ") + flag + ": must be at least 1");
            }
        }
        const int slots = threads > 0
                              ? threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        // Each connection is a file descriptor: the soft limit is raised to the hard one, and
        // --connections must leave room for the model files and the process's own.
        rlimit files{};
        if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
            files.rlim_cur = files.rlim_max;
            setrlimit(RLIMIT_NOFILE, &files);
            getrlimit(RLIMIT_NOFILE, &files);
        }
        const uint64_t max_connections =
            std::min<uint64_t>(1000000, files.rlim_cur > 256 ? files.rlim_cur - 128 : 128);
        // Default: 1024, or what the descriptors allow where that is less.
        const bool connections_given = connections != 0;
        if (!connections_given) connections = uint32_t(std::min<uint64_t>(1024, max_connections));
        if (connections_given && connections > max_connections) {
            throw Error(ErrorCategory::kUsage,
                        "option --connections: " + std::to_string(connections) +
                            " is more than the file descriptors allow; expected at most " +
                            std::to_string(max_connections) + " (ulimit -n)");
        }
        for (const auto& [flag, value] :
             {std::pair<const char*, double>{"--idle-timeout", idle_timeout},
              {"--header-timeout", header_timeout},
              {"--body-timeout", body_timeout}}) {
            if (!(value > 0 && value <= 86400)) {
                throw Error(ErrorCategory::kUsage, std::string("option ") + flag +
                                                       ": expected seconds above 0, at most "
                                                       "86400; got " +
                                                       std::to_string(value));
            }
        }
        if (workers > 4096) {
            throw Error(ErrorCategory::kUsage, "option --workers: " + std::to_string(workers) +
                                                   " threads is too many; expected at most 4096");
        }
        // A query waiting in the gate holds its thread (its loop's or a worker's), so the
        // workers bound the groups: enough
        // for a group of --group per slot computing and another waiting to form, plus one per
        // slot for batches and reloads. Measured at 64 connections on 2 cores (--group 16, the
        // benchmark's model, alternated with the previous server): 34 workers (slots x (group +
        // 1)) made groups of 9.3 on average and 1,632-1,993 queries/s, p99 68-74 ms; 80 made
        // groups of 15.3-15.6 and 2,320-2,396 queries/s, p99 43-46 ms; the previous server,
        // a thread per connection, groups of 15.7-15.9, 1,655-2,346 queries/s, p99 45-55 ms.
        // This default (66 there): groups of 15.0-15.2, 2,861-3,002 queries/s, p99 36-37 ms,
        // against the previous server's 2,704-2,885, p99 36-41 ms, in the runs alternated next.
        if (workers == 0) {
            workers = std::clamp<uint32_t>(uint32_t(slots) * (2 * group + 1), 8, 1024);
        }
        RecommenderOptions options;
        options.features_index = features_index;
        options.device = "cpu";
        options.max_concurrent_calls = slots;
        options.max_batch = max_batch;
        options.precision = precision_choice;
        options.bf16_weights_only = bf16_weights_only;
        options.bf16_input_weights = bf16_input_weights;
        options.ann_index = ann;
        options.ann_probe = ann_probe;
        options.ann_fetch = ann_fetch;
        if (!ann.empty()) screening = "off";  // the ANN index replaces the screen
        ServeOptions serve_options;
        serve_options.limits.max_k = max_k;
        serve_options.limits.max_batch = max_batch;
        serve_options.slots = slots;
        serve_options.max_group = group;

        serve::HttpOptions http;
        http.host = host;
        http.port = uint16_t(port);
        http.max_connections = connections;
        // The refusals' sockets come from the descriptors --connections leaves: up to 1,024.
        http.max_refusals = size_t(
            std::max<uint64_t>(16, std::min<uint64_t>(1024, files.rlim_cur > connections + 128
                                                                ? files.rlim_cur - connections - 128
                                                                : 0)));
        http.workers = int(workers);
        http.max_body = max_body;
        http.idle_timeout = idle_timeout;
        http.header_timeout = header_timeout;
        http.body_timeout = body_timeout;
        // Listen first: a taken port fails at once, before a minute of loading. The service
        // exists before the model: until the first load, queries answer 503 and /health
        // "loading".
        std::unique_ptr<ModelHolder> holder_box;
        std::unique_ptr<Service> service_box;
        serve::HttpServer server(
            http, [&](const serve::HttpRequest& req) { return service_box->handle(req); },
            [&](const std::string& path, int status) { service_box->count(path, status); },
            [](const std::string& message) { return serve::error_json(message); });
        const int bound = server.port();
        install_signal_handlers();
        log_line("listening on http://" + host + ":" + std::to_string(bound) + " (loading " +
                 model_path + ")");
        holder_box = std::make_unique<ModelHolder>(model_path, options, screening);
        ModelHolder& holder = *holder_box;
        service_box = std::make_unique<Service>(holder, serve_options);

        std::atomic<int> exit_code{0};
        // The watcher: signals (bytes on the pipe), and the first load's outcome.
        std::thread watcher([&] {
            for (;;) {
                char byte = 0;
                const ssize_t n = read(g_signal_pipe[0], &byte, 1);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0 || byte == 'Q') return;
                if (byte == 'H') {
                    log_line("SIGHUP: reloading " + model_path);
                    holder.request();
                    continue;
                }
                log_line(byte == 'F' ? "stopping"
                                     : "signal: finishing the requests already read (at most " +
                                           serve::format_seconds(header_timeout) +
                                           " s for those still arriving)");
                server.drain();
            }
        });
        // The first load: its failure ends the service (exit 1) with the loader's message.
        std::thread first_load([&] {
            const ModelHolder::Outcome outcome = holder.wait(holder.request());
            if (!outcome.ok) {
                exit_code = 1;
                const char byte = 'F';
                [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &byte, 1);
            }
        });
        // Nothing may escape before the threads above are joined (a joinable std::thread's
        // destructor ends the process).
        std::exception_ptr failure;
        try {
            server.run();
        } catch (...) {
            failure = std::current_exception();
        }
        first_load.join();
        const char quit = 'Q';
        [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &quit, 1);
        watcher.join();
        if (failure) std::rethrow_exception(failure);
        if (exit_code != 0) {
            std::fprintf(stderr, "sparsenet serve: error: could not load %s\n", model_path.c_str());
            return int(exit_code);
        }
        log_line("stopped");
        return 0;
    });
}

}  // namespace sparsenet::cli

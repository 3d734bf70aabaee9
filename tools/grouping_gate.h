// GroupingGate: the admission of `sparsenet serve`'s requests to its compute slots (--threads),
// in arrival order, with concurrent single queries grouped into one product.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace sparsenet::cli::serve {

// `slots` cores; a job takes `cost` of them (1 .. slots: a job that computes on a team of threads
// takes a slot per thread). Jobs start in arrival order: a job waits while an older one waits,
// and freed slots go directly to the oldest waiters, so a newcomer never overtakes. (The
// Recommender's own limit wakes an arbitrary waiter: under a steady overload a request could
// wait behind any number of later ones.)
//
// Grouping: a single query on the ML-20M shape reads the whole fp16 output matrix (33 MB) to
// score one user, so one core answers about 750 of them per second; one scan for 16 queries
// answers about 2,400 (docs/benchmarks.md, "Library"). When a slot frees and the oldest waiter
// is a groupable single query, it takes with it the groupable single queries of the same Key
// queued right behind it (at most max_group, in arrival order) and `run` answers them together.
// Queries only group while every slot is busy: a query that finds a slot free runs at once, so
// grouping adds no latency to a server with spare capacity.
//
// run(key, items) returns one Result per item, in order, or throws. When a group's run throws,
// each of its items runs alone, so that each caller gets its own answer or its own error.
template <class Key, class Item, class Result>
class GroupingGate {
  public:
    using Run = std::function<std::vector<Result>(const Key&, const std::vector<const Item*>&)>;

    GroupingGate(int slots, size_t max_group, Run run)
        : slots_(slots < 1 ? 1 : slots),
          free_(slots_),
          max_group_(max_group < 1 ? 1 : max_group),
          run_(std::move(run)) {}

    // One query, answered alone or in a group of queries with an equal key (both groupable); the
    // group takes `cost` slots.
    Result single(const Key& key, const Item& item, bool groupable, int cost = 1) {
        Job me;
        me.key = &key;
        me.item = &item;
        me.groupable = groupable && max_group_ > 1;
        me.cost = clamp(cost);
        std::unique_lock<std::mutex> lock(mutex_);
        enter(me, lock);
        if (me.state == State::kDone) return finish(me);
        std::vector<Job*> group{&me};
        while (me.groupable && group.size() < max_group_ && !queue_.empty() &&
               queue_.front()->groupable && *queue_.front()->key == key) {
            group.push_back(queue_.front());
            queue_.pop_front();
        }
        ++groups_;
        grouped_ += group.size();
        lock.unlock();
        answer(key, group);
        lock.lock();
        for (Job* j : group) {
            if (j == &me) continue;
            j->state = State::kDone;
            j->cv.notify_one();
        }
        leave(me.cost);
        lock.unlock();
        return finish(me);
    }

    // A job of its own (a whole batch request) on `cost` slots, run in its turn; f's result or
    // exception.
    template <class F>
    auto alone(F&& f, int cost = 1) -> decltype(f()) {
        Job me;
        me.cost = clamp(cost);
        std::unique_lock<std::mutex> lock(mutex_);
        enter(me, lock);
        lock.unlock();
        struct Leave {
            GroupingGate& gate;
            int cost;
            ~Leave() {
                std::lock_guard<std::mutex> l(gate.mutex_);
                gate.leave(cost);
            }
        } leave{*this, me.cost};
        return f();
    }

    int slots() const { return slots_; }

    // Jobs waiting for a slot now.
    size_t waiting() {
        std::lock_guard<std::mutex> lock(mutex_);
        return queue_.size();
    }
    // Groups run (a single query alone counts as a group of one) and the queries they held.
    std::pair<uint64_t, uint64_t> groups() {
        std::lock_guard<std::mutex> lock(mutex_);
        return {groups_, grouped_};
    }

  private:
    enum class State { kWaiting, kLead, kDone };
    struct Job {
        const Key* key = nullptr;
        const Item* item = nullptr;  // nullptr: an alone() job
        bool groupable = false;
        int cost = 1;
        State state = State::kWaiting;
        std::condition_variable cv;
        Result result{};
        std::exception_ptr error;
    };

    int clamp(int cost) const { return cost < 1 ? 1 : cost > slots_ ? slots_ : cost; }

    // Returns holding its slots (kLead), or with the job answered by another's group (kDone).
    void enter(Job& me, std::unique_lock<std::mutex>& lock) {
        if (queue_.empty() && free_ >= me.cost) {
            free_ -= me.cost;
            me.state = State::kLead;
            return;
        }
        queue_.push_back(&me);
        me.cv.wait(lock, [&] { return me.state != State::kWaiting; });
    }

    // Under the lock: frees a job's slots and starts the oldest waiters they make room for.
    void leave(int cost) {
        free_ += cost;
        while (!queue_.empty() && free_ >= queue_.front()->cost) {
            Job* next = queue_.front();
            queue_.pop_front();
            free_ -= next->cost;
            next->state = State::kLead;
            next->cv.notify_one();
        }
    }

    // Outside the lock: each job's result or error.
    void answer(const Key& key, const std::vector<Job*>& group) {
        std::vector<const Item*> items;
        for (const Job* j : group) items.push_back(j->item);
        try {
            std::vector<Result> results = run_(key, items);
            if (results.size() != group.size()) throw std::logic_error("GroupingGate: run()");
            for (size_t i = 0; i < group.size(); ++i) group[i]->result = std::move(results[i]);
            return;
        } catch (...) {
            if (group.size() == 1) {
                group[0]->error = std::current_exception();
                return;
            }
        }
        for (Job* j : group) {
            try {
                j->result = std::move(run_(key, {j->item}).at(0));
            } catch (...) {
                j->error = std::current_exception();
            }
        }
    }

    static Result finish(Job& me) {
        if (me.error) std::rethrow_exception(me.error);
        return std::move(me.result);
    }

    std::mutex mutex_;
    const int slots_;
    int free_;
    const size_t max_group_;
    const Run run_;
    std::deque<Job*> queue_;
    uint64_t groups_ = 0, grouped_ = 0;
};

}  // namespace sparsenet::cli::serve

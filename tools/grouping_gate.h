// GroupingGate: the admission of `sparsenet serve`'s requests to its compute slots (--threads),
// in arrival order, with concurrent single queries grouped into one product.
#pragma once

#include <algorithm>
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

// `slots` cores. A job starts on one slot, in arrival order: a freed slot goes directly to the
// oldest waiter, so a newcomer never overtakes. (The Recommender's own limit wakes an arbitrary
// waiter: under a steady overload a request could wait behind any number of later ones.) A job
// that nobody waits behind when it starts also takes the free slots, up to its `threads` (a team
// that splits its scan): under light load one request computes on every core; under load each
// computes on one core, which wastes nothing on a team's synchronisation (measured on the 2-core
// VM: always a team took single queries at 8 connections from 1,005-1,186 to 1,274-1,485
// queries/s in alternating runs, but in docs/benchmarks.md "Serving over HTTP" it cost a third
// of the throughput at 64 connections, 2,888 -> 1,915, and of batches, 3,505 -> 2,478).
//
// Grouping: a single query on the ML-20M shape reads the whole fp16 output matrix (33 MB) to
// score one user, so one core answers about 700 of them per second; one scan for 16 queries
// answers about 2,100 (docs/benchmarks.md, "Library", screened batches). When a slot frees and the
// oldest waiter is a groupable single query, it takes with it the groupable single queries of the
// same Key queued right behind it (at most max_group, in arrival order) and `run` answers them
// together. A query that arrives while nothing runs starts at once; one that arrives while other
// single queries compute waits for company (a second waiting job starts it) or for a job's end,
// even with a slot free: otherwise, at 8 connections on 2 cores, returning queries kept finding a
// slot free and scanned the matrix alone (groups of 1.5 queries on average). While a batch
// request computes (tens of milliseconds), a query takes a free slot at once.
//
// run(key, items, threads) returns one Result per item, in order, or throws. When a group's run
// throws, each of its items runs alone, so that each caller gets its own answer or its own
// error.
template <class Key, class Item, class Result>
class GroupingGate {
  public:
    using Run =
        std::function<std::vector<Result>(const Key&, const std::vector<const Item*>&, int)>;

    GroupingGate(int slots, size_t max_group, Run run)
        : slots_(slots < 1 ? 1 : slots),
          free_(slots_),
          max_group_(max_group < 1 ? 1 : max_group),
          run_(std::move(run)) {}

    // One query, answered alone or in a group of queries with an equal key (both groupable),
    // on 1 .. `threads` threads.
    Result single(const Key& key, const Item& item, bool groupable, int threads = 1) {
        Job me;
        me.key = &key;
        me.item = &item;
        me.groupable = groupable && max_group_ > 1;
        std::unique_lock<std::mutex> lock(mutex_);
        enter(me, lock);
        if (me.state == State::kDone) return finish(me);
        std::vector<Job*> group{&me};
        while (me.groupable && group.size() < max_group_ && !queue_.empty() &&
               queue_.front()->groupable && *queue_.front()->key == key) {
            group.push_back(queue_.front());
            queue_.pop_front();
        }
        const int team = widen(me, threads);
        lock.unlock();
        answer(key, group, team);
        lock.lock();
        for (Job* j : group) {
            if (j == &me) continue;
            j->state = State::kDone;
            j->cv.notify_one();
        }
        leave(me.slots, false);
        lock.unlock();
        return finish(me);
    }

    // A job of its own (a whole batch request), run in its turn on 1 .. `threads` threads:
    // f(threads it may use)'s result or exception.
    template <class F>
    auto alone(F&& f, int threads = 1) -> decltype(f(1)) {
        Job me;
        std::unique_lock<std::mutex> lock(mutex_);
        enter(me, lock);
        const int team = widen(me, threads);
        lock.unlock();
        struct Leave {
            GroupingGate& gate;
            int slots;
            ~Leave() {
                std::lock_guard<std::mutex> l(gate.mutex_);
                gate.leave(slots, true);
            }
        } leave{*this, me.slots};
        return f(team);
    }

    int slots() const { return slots_; }

    // Jobs waiting for a slot now.
    size_t waiting() {
        std::lock_guard<std::mutex> lock(mutex_);
        return queue_.size();
    }
    // Groups answered (a single query alone counts as a group of one) and the queries they
    // answered; a failed group's queries count as the groups of one that each then ran alone,
    // and a query refused counts nowhere.
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
        int slots = 1;  // taken while it runs
        State state = State::kWaiting;
        std::condition_variable cv;
        Result result{};
        std::exception_ptr error;
    };

    // Returns holding a slot (kLead), or with the job answered by another's group (kDone).
    void enter(Job& me, std::unique_lock<std::mutex>& lock) {
        queue_.push_back(&me);
        admit(false);
        me.cv.wait(lock, [&] { return me.state != State::kWaiting; });
    }

    // Under the lock: starts the oldest waiters on free slots. A groupable query alone in the
    // queue waits while single queries compute, for company or for a job's end (`ended`: one
    // did), which bounds its wait by a query's time and makes groups of the arrivals that would
    // each have scanned the whole matrix alone. While a batch request computes (a long job) it
    // takes a free slot at once.
    void admit(bool ended) {
        while (!queue_.empty() && free_ > 0) {
            Job* next = queue_.front();
            if (!ended && running_ > 0 && running_alone_ == 0 && next->groupable &&
                queue_.size() < 2) {
                return;
            }
            ended = false;
            queue_.pop_front();
            --free_;
            ++running_;
            if (next->item == nullptr) ++running_alone_;
            next->state = State::kLead;
            next->cv.notify_one();
        }
    }

    // Under the lock, as a job starts: with nobody waiting, it takes free slots up to `threads`
    // in all. Returns its threads.
    int widen(Job& me, int threads) {
        if (queue_.empty()) {
            const int extra = std::max(0, std::min(free_, threads - 1));
            free_ -= extra;
            me.slots += extra;
        }
        return me.slots;
    }

    // Under the lock: frees a job's slots for the oldest waiters (`alone`: an alone() job).
    void leave(int slots, bool alone) {
        free_ += slots;
        --running_;
        if (alone) --running_alone_;
        admit(true);
    }

    // Outside the lock: each job's result or error.
    void answer(const Key& key, const std::vector<Job*>& group, int threads) {
        std::vector<const Item*> items;
        for (const Job* j : group) items.push_back(j->item);
        try {
            std::vector<Result> results = run_(key, items, threads);
            if (results.size() != group.size()) throw std::logic_error("GroupingGate: run()");
            for (size_t i = 0; i < group.size(); ++i) group[i]->result = std::move(results[i]);
            count(1, group.size());
            return;
        } catch (...) {
            if (group.size() == 1) {
                group[0]->error = std::current_exception();
                return;
            }
        }
        for (Job* j : group) {
            try {
                j->result = std::move(run_(key, {j->item}, threads).at(0));
                count(1, 1);
            } catch (...) {
                j->error = std::current_exception();
            }
        }
    }

    // Counts only the queries answered: a query refused (an unknown item without
    // ignore_unknown) was ranked in no group.
    void count(uint64_t groups, uint64_t queries) {
        std::lock_guard<std::mutex> lock(mutex_);
        groups_ += groups;
        grouped_ += queries;
    }

    static Result finish(Job& me) {
        if (me.error) std::rethrow_exception(me.error);
        return std::move(me.result);
    }

    std::mutex mutex_;
    const int slots_;
    int free_;
    int running_ = 0;        // jobs holding slots
    int running_alone_ = 0;  // of which alone() jobs
    const size_t max_group_;
    const Run run_;
    std::deque<Job*> queue_;
    uint64_t groups_ = 0, grouped_ = 0;
};

}  // namespace sparsenet::cli::serve

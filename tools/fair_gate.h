// FairGate: the admission of `sparsenet serve`'s requests to the Recommender, in arrival order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace sparsenet::cli::serve {

// Lets `slots` requests compute at once and the others wait in arrival order. The Recommender's
// own limit wakes an arbitrary waiter, so under a steady overload a request could wait behind
// any number of later ones. A slot is handed directly to the oldest waiter, so a newcomer never
// overtakes. (The run that prompted it, p99 5.56 s for a median of 0.11 s at 64 connections,
// benchmarks/results/2026-11-26-vm-serve-before-fair-gate.json, was mostly the listen backlog
// fixed later in serve.cpp; with both, p99 was 0.37 s for 0.15 s: docs/benchmarks.md.)
class FairGate {
  public:
    explicit FairGate(int slots) : free_(slots) {}

    class Pass {
      public:
        explicit Pass(FairGate& gate) : gate_(gate) { gate_.enter(); }
        ~Pass() { gate_.leave(); }
        Pass(const Pass&) = delete;
        Pass& operator=(const Pass&) = delete;

      private:
        FairGate& gate_;
    };

    // Requests waiting for a slot now.
    size_t waiting() {
        std::lock_guard<std::mutex> lock(mutex_);
        return queue_.size();
    }

  private:
    struct Waiter {
        std::condition_variable cv;
        bool admitted = false;
    };

    void enter() {
        std::unique_lock<std::mutex> lock(mutex_);
        if (free_ > 0 && queue_.empty()) {
            --free_;
            return;
        }
        Waiter me;
        queue_.push_back(&me);
        me.cv.wait(lock, [&] { return me.admitted; });
    }

    void leave() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (queue_.empty()) {
            ++free_;
            return;
        }
        Waiter* next = queue_.front();
        queue_.pop_front();
        next->admitted = true;
        next->cv.notify_one();
    }

    std::mutex mutex_;
    int free_;
    std::deque<Waiter*> queue_;
};

}  // namespace sparsenet::cli::serve

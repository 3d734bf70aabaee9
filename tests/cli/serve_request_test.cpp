// The pieces of `sparsenet serve` without a server: the JSON of its requests
// (tools/serve_request.cpp: what a query becomes, what each refusal names, answers that give back
// the scores exactly) and the order in which requests get a compute slot (tools/fair_gate.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fair_gate.h"
#include "serve_request.h"

namespace sparsenet::cli::serve {
namespace {

Query query(const std::string& body, const RequestLimits& limits = {}) {
    return parse_query(parse_json(body), limits);
}

// The BadRequest message of `body` (a failure when it is accepted).
std::string refusal(const std::string& body, const RequestLimits& limits = {}) {
    try {
        query(body, limits);
    } catch (const BadRequest& e) {
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << body;
    return "";
}

TEST(ServeRequest, AQueryBecomesTheRecommendersQuery) {
    const Query q = query(R"({"items": ["a", 17, ["b", 2.5], [3, -1]], "k": 7,
                              "exclude": ["c", 4], "allow": [5, "d"], "exclude_inputs": false,
                              "ignore_unknown": false})");
    ASSERT_EQ(q.items.size(), 4u);
    EXPECT_TRUE(q.items[0].by_name);
    EXPECT_EQ(q.items[0].name, "a");
    EXPECT_FALSE(q.items[1].by_name);
    EXPECT_EQ(q.items[1].id, 17);
    EXPECT_EQ(q.items[2].name, "b");
    EXPECT_EQ(q.items[2].weight, 2.5f);
    EXPECT_EQ(q.items[3].id, 3);
    EXPECT_EQ(q.items[3].weight, -1.0f);
    EXPECT_EQ(q.options.k, 7u);
    ASSERT_EQ(q.options.deny.size(), 2u);
    EXPECT_EQ(q.options.deny[0].name, "c");
    EXPECT_EQ(q.options.deny[1].id, 4);
    ASSERT_EQ(q.options.allow.size(), 2u);
    EXPECT_FALSE(q.options.exclude_inputs);
    EXPECT_FALSE(q.options.ignore_unknown);
    // Defaults: k 10, inputs excluded, unknown items skipped and reported.
    const Query d = query(R"({"items": []})");
    EXPECT_EQ(d.options.k, 10u);
    EXPECT_TRUE(d.options.exclude_inputs);
    EXPECT_TRUE(d.options.ignore_unknown);
    EXPECT_TRUE(d.options.allow.empty() && d.options.deny.empty());
    // An integral number written as a real is an integer.
    EXPECT_EQ(query(R"({"items": [2.0], "k": 3.0})").options.k, 3u);
}

TEST(ServeRequest, RefusalsNameTheField) {
    RequestLimits limits;
    limits.max_k = 50;
    limits.max_items = 3;
    EXPECT_NE(refusal(R"({"items": [1], "k": 51})", limits)
                  .find("k: expected an integer from 1 to 50; got 51"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [1, 2, 3, 4]})", limits).find("items: 4 entries; at most 3"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [1], "allow": [1, 2, 3, 4]})", limits).find("allow: 4"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [null]})").find("items[0]: expected a name"), std::string::npos);
    EXPECT_NE(refusal(R"({"items": [18446744073709551615]})").find("above 2^63-1"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [["a", null]]})").find("items[0][1]: expected the weight"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [["a", 1e300]]})").find("items[0][1]: expected a finite"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [["a", 1, 2]]})").find("2 entries; got 3"), std::string::npos);
    EXPECT_NE(refusal(R"({"items": [], "exclude": [[1, 2]]})").find("exclude[0]"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [], "Items": []})").find("unknown field \"Items\""),
              std::string::npos);
    EXPECT_NE(refusal(R"(["items"])").find("request body: expected a query object"),
              std::string::npos);
    // Long strings are shortened in messages.
    const std::string msg = refusal(R"({"items": [], "k": ")" + std::string(500, 'z') + "\"}");
    EXPECT_LT(msg.size(), 200u) << msg;
}

TEST(ServeRequest, JsonSyntaxErrorsSayWhere) {
    try {
        parse_json("{\"items\": [1,\n 2,, 3]}");
        FAIL();
    } catch (const BadRequest& e) {
        EXPECT_NE(std::string(e.what()).find("Line 2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_json("{} {}"), BadRequest);
    EXPECT_THROW(parse_json("{\"a\": 1, \"a\": 2}"), BadRequest);
    EXPECT_THROW(parse_json("{\"a\": 1} // comment"), BadRequest);
    EXPECT_THROW(parse_json(std::string(1000, '[') + std::string(1000, ']')), BadRequest);
    EXPECT_THROW(parse_json(""), BadRequest);
}

TEST(ServeRequest, BatchesArePathedByIndex) {
    RequestLimits limits;
    limits.max_batch = 2;
    EXPECT_EQ(parse_batch(parse_json(R"([{"items": [1]}, {"items": [2], "k": 3}])"), limits)
                  .at(1)
                  .options.k,
              3u);
    try {
        parse_batch(parse_json(R"([{"items": [1]}, {"items": [2], "k": 0}])"), limits);
        FAIL();
    } catch (const BadRequest& e) {
        EXPECT_NE(std::string(e.what()).find("[1].k: "), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_batch(parse_json("[]"), limits), BadRequest);
    EXPECT_THROW(parse_batch(parse_json(R"([{"items":[]},{"items":[]},{"items":[]}])"), limits),
                 BadRequest);
    EXPECT_THROW(parse_batch(parse_json(R"({"items": []})"), limits), BadRequest);
}

TEST(ServeRequest, AnswersGiveBackTheScoresExactly) {
    Recommendations recs;
    const float scores[] = {0.1f,     1.0f / 3.0f, 123456.789f, std::numeric_limits<float>::min(),
                            -2.5e-7f, 0.99999994f};
    uint32_t id = 0;
    for (float s : scores) recs.items.push_back({"n" + std::to_string(id), id++, s});
    recs.unknown = {"x", "\"quoted\""};
    const Json::Value back = parse_json(write_json(to_json(recs)));
    ASSERT_EQ(back["items"].size(), recs.items.size());
    for (Json::ArrayIndex i = 0; i < back["items"].size(); ++i) {
        EXPECT_EQ(static_cast<float>(back["items"][i]["score"].asDouble()), recs.items[i].score);
        EXPECT_EQ(back["items"][i]["id"].asUInt(), recs.items[i].id);
        EXPECT_EQ(back["items"][i]["name"].asString(), recs.items[i].name);
    }
    EXPECT_EQ(back["unknown"][1].asString(), "\"quoted\"");
    EXPECT_EQ(parse_json(error_json("a \"b\"\n"))["error"].asString(), "a \"b\"\n");
}

// Waits (without asserting any timing) until `n` requests wait at the gate.
bool wait_for_waiting(FairGate& gate, size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (gate.waiting() < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

TEST(FairGate, AdmitsWaitersInArrivalOrder) {
    FairGate gate(1);
    auto holder = std::make_unique<FairGate::Pass>(gate);  // the only slot, taken
    std::mutex mutex;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < 5; ++i) {
        threads.emplace_back([&, i] {
            FairGate::Pass pass(gate);
            std::lock_guard<std::mutex> lock(mutex);
            order.push_back(i);
        });
        // The next one arrives only once this one waits.
        ASSERT_TRUE(wait_for_waiting(gate, size_t(i) + 1));
    }
    holder.reset();
    for (auto& t : threads) t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_EQ(gate.waiting(), 0u);
}

TEST(FairGate, SlotsAdmitAtOnceAndAFreedSlotGoesToTheOldestWaiter) {
    FairGate gate(2);
    auto a = std::make_unique<FairGate::Pass>(gate);
    auto b = std::make_unique<FairGate::Pass>(gate);  // two slots: neither waits
    EXPECT_EQ(gate.waiting(), 0u);
    std::atomic<bool> first_in{false}, second_in{false}, let_first_go{false};
    std::thread first([&] {
        FairGate::Pass pass(gate);
        first_in = true;
        while (!let_first_go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    ASSERT_TRUE(wait_for_waiting(gate, 1));
    std::thread second([&] {
        FairGate::Pass pass(gate);
        second_in = true;
    });
    ASSERT_TRUE(wait_for_waiting(gate, 2));
    a.reset();  // one slot frees: the oldest waiter takes it, the other keeps waiting
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!first_in && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(first_in);
    EXPECT_FALSE(second_in);  // b and `first` hold both slots
    EXPECT_EQ(gate.waiting(), 1u);
    let_first_go = true;
    first.join();
    second.join();  // admitted once `first` left
    EXPECT_TRUE(second_in);
    b.reset();
    EXPECT_EQ(gate.waiting(), 0u);
}

}  // namespace
}  // namespace sparsenet::cli::serve

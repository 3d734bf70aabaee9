// The pieces of `sparsenet serve` without a server: the JSON of its requests
// (tools/serve_request.cpp: what a query becomes, what each refusal names, answers that give back
// the scores exactly) and the order in which requests get a compute slot, with concurrent single
// queries grouped (tools/grouping_gate.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "grouping_gate.h"
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
    // A number written as a real is not an integer, even when its value is integral.
    EXPECT_NE(refusal(R"({"items": [1], "k": 3.0})")
                  .find("k: expected an integer from 1 to 1000; "
                        "got the number 3.0 (not an integer)"),
              std::string::npos)
        << refusal(R"({"items": [1], "k": 3.0})");
    EXPECT_NE(refusal(R"({"items": [1e0]})").find("items[0]: expected a name (string), an id"),
              std::string::npos);
    EXPECT_NE(refusal(R"({"items": [[1.0, 2]]})").find("items[0][0]"), std::string::npos);
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
    // Values are quoted whole up to kQuotedLimit characters, then cut and marked.
    const std::string msg = refusal(R"({"items": [], "k": ")" + std::string(500, 'z') + "\"}");
    EXPECT_NE(
        msg.find("got the string \"" + std::string(kQuotedLimit - 1, 'z') + "... (502 characters)"),
        std::string::npos)
        << msg;
    EXPECT_LT(msg.size(), kQuotedLimit + 100) << msg;
    const std::string whole = refusal(R"({"items": [], "k": ")" + std::string(150, 'z') + "\"}");
    EXPECT_NE(whole.find("\"" + std::string(150, 'z') + "\""), std::string::npos) << whole;
    // Arrays and objects are quoted too.
    EXPECT_NE(refusal(R"({"items": [{"a": [1, 2]}]})").find(R"(got the object {"a":[1,2]})"),
              std::string::npos);
    // A NUL or a newline in a name is refused, and the message shows it escaped, whole.
    const std::string nul = refusal(R"({"items": ["ab\u0000cd"]})");
    EXPECT_NE(nul.find(R"(items[0]: a name holds no control characters)"), std::string::npos)
        << nul;
    EXPECT_NE(nul.find(R"("ab\u0000cd")"), std::string::npos) << nul;
    EXPECT_NE(refusal(R"({"items": [1], "exclude": ["x\ny"]})").find(R"(exclude[0]: )"),
              std::string::npos);
}

TEST(ServeRequest, JsonSyntaxErrorsSayWhere) {
    try {
        parse_json("{\"items\": [1,\n 2,, 3]}");
        FAIL();
    } catch (const BadRequest& e) {
        EXPECT_NE(std::string(e.what()).find("invalid JSON at line 2, column 4: expected a value"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(parse_json("{} {}"), BadRequest);
    EXPECT_THROW(parse_json("{\"a\": 1, \"a\": 2}"), BadRequest);
    EXPECT_THROW(parse_json("{\"a\": 1} // comment"), BadRequest);
    EXPECT_THROW(parse_json(std::string(1000, '[') + std::string(1000, ']')), BadRequest);
    EXPECT_THROW(parse_json(""), BadRequest);
}

TEST(ServeRequest, LongErrorMessagesAreCutAndMarked) {
    EXPECT_EQ(error_json("short"), R"({"error":"short"})");
    const std::string cut = error_json(std::string(5000, 'u'));
    EXPECT_NE(cut.find(std::string(kMessageLimit, 'u') + "... (5000 characters)"),
              std::string::npos);
    EXPECT_EQ(cut.find(std::string(kMessageLimit + 1, 'u')), std::string::npos);
}

// What JsonCpp's strict mode alone let through: each refused with the cause.
TEST(ServeRequest, StrictJsonRefusesWhatJsonCppTakes) {
    auto cause = [](const std::string& body) -> std::string {
        try {
            parse_json(body);
        } catch (const BadRequest& e) {
            return e.what();
        }
        ADD_FAILURE() << "accepted: " << body;
        return "";
    };
    EXPECT_NE(cause(R"({"items":[1],/* c */"k":1})").find("column 14: expected a member name"),
              std::string::npos)
        << cause(R"({"items":[1],/* c */"k":1})");
    EXPECT_NE(cause(R"({"items":[1]} /* c */)").find("text after the JSON document"),
              std::string::npos);
    EXPECT_NE(cause(std::string("{\"items\":[1]}\0garbage", 21)).find("text after the JSON"),
              std::string::npos);
    EXPECT_NE(cause(R"({"items":[1]}})").find("text after the JSON document ('}')"),
              std::string::npos);
    EXPECT_NE(cause("{\"items\":[\"a\xff\"]}").find("invalid UTF-8 (byte 0xFF)"),
              std::string::npos);
    EXPECT_NE(cause("{\"items\":[\"\xc0\xaf\"]}").find("invalid UTF-8"), std::string::npos);
    EXPECT_NE(cause("{\"items\":[\"\xed\xa0\x80\"]}").find("surrogate"), std::string::npos);
    EXPECT_NE(cause(R"({"items":["\udc00"]})").find("lone low surrogate"), std::string::npos);
    EXPECT_NE(cause(R"({"items":["\ud800x"]})").find("lone high surrogate"), std::string::npos);
    EXPECT_NE(cause(R"({"items":[01]})").find("leading 0"), std::string::npos);
    EXPECT_NE(cause(R"({"items":[1.]})").find("expected a digit"), std::string::npos);
    EXPECT_NE(cause(R"({'items':[1]})").find("expected a member name"), std::string::npos);
    EXPECT_NE(cause("{\"items\":[\"a\tb\"]}").find("a control character in a string"),
              std::string::npos);
    EXPECT_NE(cause(R"({"items":[1],})").find("expected a member name"), std::string::npos);
    EXPECT_NE(cause(std::string(40, '[') + std::string(40, ']')).find("deeper than 32"),
              std::string::npos);
    EXPECT_NE(cause(std::string(100000, '[')).find("deeper than 32"), std::string::npos);
    EXPECT_NE(cause(R"({"items":[1], "k": 1, "k": 2})").find("Duplicate key"), std::string::npos)
        << cause(R"({"items":[1], "k": 1, "k": 2})");
    // Valid UTF-8, escapes and surrogate pairs pass, and so does white space around the document.
    EXPECT_EQ(parse_json("\r\n {\"items\": [\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", "
                         "\"\\ud83d\\ude00\\n\\/\"], \"k\": -0.5e+2} \n")["k"]
                  .asDouble(),
              -50.0);
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

// A gate of int queries keyed by int: run() answers item * 10, records each group and its
// threads, throws for a group that holds a negative item, and holds a group that holds 100
// until `release_100` (a single query that keeps computing).
struct TestGate {
    std::mutex mutex;
    std::vector<std::vector<int>> groups;  // the items of each run() call, in call order
    std::vector<int> threads;              // the threads of each run() call
    std::atomic<bool> running_100{false}, release_100{false};
    GroupingGate<int, int, int> gate;

    TestGate(int slots, size_t max_group)
        : gate(slots, max_group,
               [this](const int&, const std::vector<const int*>& items, int team) {
                   std::vector<int> group, out;
                   for (const int* i : items) group.push_back(*i);
                   {
                       std::lock_guard<std::mutex> lock(mutex);
                       groups.push_back(group);
                       threads.push_back(team);
                   }
                   for (int i : group) {
                       if (i < 0) throw std::runtime_error("negative " + std::to_string(i));
                       if (i == 100) {
                           running_100 = true;
                           while (!release_100)
                               std::this_thread::sleep_for(std::chrono::milliseconds(1));
                       }
                       out.push_back(i * 10);
                   }
                   return out;
               }) {}
};

// Waits (without asserting any timing) until `n` requests wait at the gate.
bool wait_for_waiting(GroupingGate<int, int, int>& gate, size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (gate.waiting() < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// Holds one slot (an alone() job) until release().
class SlotHolder {
  public:
    explicit SlotHolder(GroupingGate<int, int, int>& gate)
        : thread_([this, &gate] {
              gate.alone([this](int) {
                  in_ = true;
                  while (!go_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  return 0;
              });
          }) {
        while (!in_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ~SlotHolder() { release(); }
    void release() {
        go_ = true;
        if (thread_.joinable()) thread_.join();
    }

  private:
    std::atomic<bool> in_{false}, go_{false};
    std::thread thread_;
};

TEST(GroupingGate, AdmitsWaitersInArrivalOrder) {
    TestGate t(1, 8);
    SlotHolder holder(t.gate);  // the only slot, taken
    std::mutex mutex;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < 5; ++i) {
        threads.emplace_back([&, i] {
            t.gate.alone([&](int) {
                std::lock_guard<std::mutex> lock(mutex);
                order.push_back(i);
                return 0;
            });
        });
        // The next one arrives only once this one waits.
        ASSERT_TRUE(wait_for_waiting(t.gate, size_t(i) + 1));
    }
    holder.release();
    for (auto& th : threads) th.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_EQ(t.gate.waiting(), 0u);
}

TEST(GroupingGate, SlotsAdmitAtOnceAndAFreedSlotGoesToTheOldestWaiter) {
    TestGate t(2, 8);
    auto a = std::make_unique<SlotHolder>(t.gate);
    SlotHolder b(t.gate);  // two slots: neither waits
    EXPECT_EQ(t.gate.waiting(), 0u);
    std::atomic<bool> first_in{false}, second_in{false}, let_first_go{false};
    std::thread first([&] {
        t.gate.alone([&](int) {
            first_in = true;
            while (!let_first_go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return 0;
        });
    });
    ASSERT_TRUE(wait_for_waiting(t.gate, 1));
    std::thread second([&] { t.gate.alone([&](int) { return int(second_in = true); }); });
    ASSERT_TRUE(wait_for_waiting(t.gate, 2));
    a.reset();  // one slot frees: the oldest waiter takes it, the other keeps waiting
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!first_in && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(first_in);
    EXPECT_FALSE(second_in);  // b and `first` hold both slots
    EXPECT_EQ(t.gate.waiting(), 1u);
    let_first_go = true;
    first.join();
    second.join();  // admitted once `first` left
    EXPECT_TRUE(second_in);
    b.release();
    EXPECT_EQ(t.gate.waiting(), 0u);
}

// Jobs queued behind a held slot, one at a time: (key, item, groupable), item 0 an alone() job.
// Returns each caller's answer (-1 for an error) and leaves the groups in t.groups.
std::vector<int> queue_and_release(TestGate& t, const std::vector<std::tuple<int, int, bool>>& jobs,
                                   std::vector<std::string>* errors = nullptr) {
    std::vector<int> answers(jobs.size(), 0);
    std::vector<std::string> messages(jobs.size());
    {
        SlotHolder holder(t.gate);
        std::vector<std::thread> threads;
        for (size_t i = 0; i < jobs.size(); ++i) {
            threads.emplace_back([&, i] {
                const auto [key, item, groupable] = jobs[i];
                try {
                    answers[i] = item == 0 ? t.gate.alone([](int) { return 7; })
                                           : t.gate.single(key, item, groupable);
                } catch (const std::exception& e) {
                    answers[i] = -1;
                    messages[i] = e.what();
                }
            });
            EXPECT_TRUE(wait_for_waiting(t.gate, i + 1));
        }
        holder.release();
        for (auto& th : threads) th.join();
    }
    if (errors != nullptr) *errors = messages;
    return answers;
}

TEST(GroupingGate, WaitingSinglesOfOneKeyRunAsOneGroupInArrivalOrder) {
    TestGate t(1, 8);
    // A group takes the queries right behind its first one while they share its key and are
    // groupable; an alone() job or another key ends it.
    const std::vector<int> answers = queue_and_release(t, {{1, 1, true},
                                                           {1, 2, true},
                                                           {2, 3, true},
                                                           {1, 4, true},
                                                           {1, 0, false},
                                                           {1, 5, true},
                                                           {1, 6, false},
                                                           {1, 8, true},
                                                           {1, 9, true}});
    EXPECT_EQ(answers, (std::vector<int>{10, 20, 30, 40, 7, 50, 60, 80, 90}));
    EXPECT_EQ(t.groups, (std::vector<std::vector<int>>{{1, 2}, {3}, {4}, {5}, {6}, {8, 9}}));
    EXPECT_EQ(t.gate.groups(), (std::pair<uint64_t, uint64_t>{6, 8}));
}

TEST(GroupingGate, GroupsHoldAtMostMaxGroup) {
    TestGate t(1, 2);
    const std::vector<int> answers = queue_and_release(
        t, {{1, 1, true}, {1, 2, true}, {1, 3, true}, {1, 4, true}, {1, 5, true}});
    EXPECT_EQ(answers, (std::vector<int>{10, 20, 30, 40, 50}));
    EXPECT_EQ(t.groups, (std::vector<std::vector<int>>{{1, 2}, {3, 4}, {5}}));
}

TEST(GroupingGate, MaxGroupOneNeverGroups) {
    TestGate t(1, 1);
    queue_and_release(t, {{1, 1, true}, {1, 2, true}, {1, 3, true}});
    EXPECT_EQ(t.groups, (std::vector<std::vector<int>>{{1}, {2}, {3}}));
}

// A job that nobody waits behind when it starts takes the free slots, up to its threads; one
// that starts while others wait computes on its one slot.
TEST(GroupingGate, AJobTakesTheFreeSlotsOnlyWhenNobodyWaits) {
    TestGate t(3, 8);
    EXPECT_EQ(t.gate.slots(), 3);
    EXPECT_EQ(t.gate.single(1, 1, true, 2), 10);   // idle: two of the three slots
    EXPECT_EQ(t.gate.single(1, 2, true, 5), 20);   // idle: all three
    EXPECT_EQ(t.gate.single(1, 3, false, 1), 30);  // asks for one
    EXPECT_EQ(t.gate.alone([](int team) { return team; }, 3), 3);
    EXPECT_EQ(t.threads, (std::vector<int>{2, 3, 1}));

    auto h1 = std::make_unique<SlotHolder>(t.gate);
    auto h2 = std::make_unique<SlotHolder>(t.gate);
    auto h3 = std::make_unique<SlotHolder>(t.gate);  // every slot taken
    std::thread a([&] { t.gate.single(1, 4, true, 3); });
    ASSERT_TRUE(wait_for_waiting(t.gate, 1));
    std::thread b([&] { t.gate.single(2, 5, true, 3); });  // another key: not grouped with a
    ASSERT_TRUE(wait_for_waiting(t.gate, 2));
    h1.reset();  // `a` starts while `b` waits: one slot
    a.join();    // then `b` takes the freed slot; nobody waits, but no other slot is free
    b.join();
    h2.reset();
    h3.reset();
    EXPECT_EQ(t.gate.single(1, 6, true, 3), 60);  // idle again: all three
    EXPECT_EQ(t.groups, (std::vector<std::vector<int>>{{1}, {2}, {3}, {4}, {5}, {6}}));
    EXPECT_EQ(t.threads, (std::vector<int>{2, 3, 1, 1, 1, 3}));
    EXPECT_EQ(t.gate.waiting(), 0u);
}

// A groupable query that arrives while a single query computes waits for company, or for that
// query's end, even with a slot free; a query that cannot group takes the free slot at once.
TEST(GroupingGate, AQueryArrivingWhileAQueryComputesWaitsForCompany) {
    TestGate t(2, 8);
    std::thread r([&] { EXPECT_EQ(t.gate.single(9, 100, true, 1), 1000); });
    while (!t.running_100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread x([&] { EXPECT_EQ(t.gate.single(1, 1, true, 2), 10); });
    ASSERT_TRUE(wait_for_waiting(t.gate, 1));  // waits with a slot free
    std::thread y([&] { EXPECT_EQ(t.gate.single(1, 2, true, 2), 20); });
    x.join();  // company: x starts and takes y into its group, on the one free slot
    y.join();
    EXPECT_EQ(t.gate.single(1, 3, false, 2), 30);  // not groupable: starts at once
    std::thread z([&] { EXPECT_EQ(t.gate.single(1, 4, true, 2), 40); });
    ASSERT_TRUE(wait_for_waiting(t.gate, 1));
    t.release_100 = true;  // the computing query ends: z starts, on both slots (nobody waits)
    r.join();
    z.join();
    EXPECT_EQ(t.groups, (std::vector<std::vector<int>>{{100}, {1, 2}, {3}, {4}}));
    EXPECT_EQ(t.threads, (std::vector<int>{1, 1, 1, 2}));
    EXPECT_EQ(t.gate.waiting(), 0u);
}

// While a batch request (an alone() job) computes, a query takes a free slot at once: a batch
// takes tens of milliseconds, too long to wait for company.
TEST(GroupingGate, AQueryDoesNotWaitBehindABatch) {
    TestGate t(2, 8);
    SlotHolder batch(t.gate);                     // computing, one slot free
    EXPECT_EQ(t.gate.single(1, 5, true, 2), 50);  // at once, on the free slot
    EXPECT_EQ(t.threads, (std::vector<int>{1}));
    batch.release();
}

TEST(GroupingGate, AFailedGroupAnswersEachQueryAlone) {
    TestGate t(1, 8);
    std::vector<std::string> errors;
    const std::vector<int> answers =
        queue_and_release(t, {{1, 1, true}, {1, -2, true}, {1, 3, true}}, &errors);
    EXPECT_EQ(answers, (std::vector<int>{10, -1, 30}));
    EXPECT_EQ(errors[1], "negative -2");
    EXPECT_EQ(t.groups, (std::vector<std::vector<int>>{{1, -2, 3}, {1}, {-2}, {3}}));
    // Counted: the two queries answered, each alone; the refused one nowhere.
    EXPECT_EQ(t.gate.groups(), (std::pair<uint64_t, uint64_t>{2, 2}));
    // The gate goes on: a query finds the slot free and runs at once.
    EXPECT_EQ(t.gate.single(1, 4, true), 40);
    EXPECT_EQ(t.gate.waiting(), 0u);
}

}  // namespace
}  // namespace sparsenet::cli::serve

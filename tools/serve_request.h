// sparsenet serve: the JSON of its requests and answers, apart from the sockets (so that every
// rule of a request is unit tested without a server: tests/cli/serve_request_test.cpp).
#pragma once

#include <json/json.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparsenet/recommender.h"

namespace sparsenet::cli::serve {

// A request the service refuses with 400 and {"error": what()}: the message names the field
// (a JSON path such as "items[3]" or "[2].k") and what was expected.
class BadRequest : public std::runtime_error {
  public:
    explicit BadRequest(const std::string& message) : std::runtime_error(message) {}
};

struct RequestLimits {
    uint32_t max_k = 1000;      // k above this is refused (a typo of a huge k costs memory)
    size_t max_items = 100000;  // query items, allow or exclude entries per query
    size_t max_batch = 256;     // queries per /recommend/batch request
};

// The body as JSON: strict RFC 8259 (no comments, nothing but white space after the document,
// valid UTF-8 in strings, no lone surrogate escapes, no duplicate keys), nesting at most 32 deep.
// BadRequest naming the line and column and the cause otherwise.
Json::Value parse_json(const std::string& body);

// The longest JSON text of a value that a message quotes whole (longer ones are cut, marked
// "... (N characters)").
constexpr size_t kQuotedLimit = 200;

// `value` as JSON text for a message (strings escaped: a NUL or a newline shows as \u0000, \n),
// cut at kQuotedLimit characters.
std::string quoted(const Json::Value& value);
std::string quoted(const std::string& text);  // the string `text`, quoted and escaped

// One query object (the body of POST /recommend):
//   {"items": [...], "k": 10, "exclude": [...], "allow": [...], "exclude_inputs": true,
//    "ignore_unknown": true}
// items: names (strings), ids (integers >= 0) or [item, weight] pairs; only "items" is
// required. `path` prefixes the fields in messages ("" for a single query, "[2]" in a batch).
// Unknown items are skipped and reported unless ignore_unknown is false (then they are an
// error of the Recommender, also a 400).
Query parse_query(const Json::Value& value, const RequestLimits& limits,
                  const std::string& path = "");

// The body of POST /recommend/batch: a non-empty array of query objects, at most
// limits.max_batch.
std::vector<Query> parse_batch(const Json::Value& value, const RequestLimits& limits);

// {"items": [{"id": 3, "name": "x", "score": 0.97}, ...], "unknown": [...]}. Scores are written
// with 9 significant digits: a float read back from them is the same float.
Json::Value to_json(const Recommendations& recs);

// Compact JSON text of `value` (one line, no trailing newline).
std::string write_json(const Json::Value& value);

// The longest error message sent whole: the Recommender's refusal of unknown items lists them
// all, which a query of 100,000 unknown names would make megabytes long.
constexpr size_t kMessageLimit = 2000;

// {"error": message} as text, the message cut at kMessageLimit characters and marked
// "... (N characters)".
std::string error_json(const std::string& message);

}  // namespace sparsenet::cli::serve

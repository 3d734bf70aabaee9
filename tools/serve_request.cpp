#include "serve_request.h"

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>

namespace sparsenet::cli::serve {
namespace {

const char* kQueryFields = "items, k, exclude, allow, exclude_inputs, ignore_unknown";

// A short description of a JSON value for messages: its type, and the value itself when short.
std::string describe(const Json::Value& v) {
    switch (v.type()) {
        case Json::nullValue:
            return "null";
        case Json::booleanValue:
            return v.asBool() ? "true" : "false";
        case Json::intValue:
        case Json::uintValue:
        case Json::realValue:
            return "the number " + write_json(v);
        case Json::stringValue: {
            std::string s = v.asString();
            if (s.size() > 40) s = s.substr(0, 40) + "...";
            return "the string " + write_json(Json::Value(s));
        }
        case Json::arrayValue:
            return "an array";
        case Json::objectValue:
            return "an object";
    }
    return "a value";
}

std::string field(const std::string& path, const std::string& name) {
    return path.empty() ? name : path + "." + name;
}

// An item reference: a name, an id (integer >= 0) or, when `weighted`, [item, weight].
ItemRef parse_item(const Json::Value& v, const std::string& where, bool weighted) {
    const char* expected = weighted ? "expected a name (string), an id (integer >= 0) or "
                                      "[item, weight]"
                                    : "expected a name (string) or an id (integer >= 0)";
    if (v.isString()) return ItemRef(v.asString());
    if (v.isIntegral()) {
        if (v.isInt64() && v.asInt64() < 0) {
            throw BadRequest(where + ": " + expected + "; got the negative id " + write_json(v));
        }
        if (!v.isInt64()) {
            throw BadRequest(where + ": " + expected + "; got the id " + write_json(v) +
                             ", above 2^63-1");
        }
        return ItemRef(v.asInt64());
    }
    if (weighted && v.isArray()) {
        if (v.size() != 2) {
            throw BadRequest(where + ": expected [item, weight], 2 entries; got " +
                             std::to_string(v.size()));
        }
        ItemRef item = parse_item(v[0], where + "[0]", false);
        const Json::Value& w = v[1];
        if (!w.isNumeric() || w.isBool()) {
            throw BadRequest(where + "[1]: expected the weight (a number); got " + describe(w));
        }
        const double weight = w.asDouble();
        if (!std::isfinite(weight) || std::fabs(weight) > std::numeric_limits<float>::max()) {
            throw BadRequest(where + "[1]: expected a finite weight; got " + write_json(w));
        }
        item.weight = static_cast<float>(weight);
        return item;
    }
    throw BadRequest(where + ": " + expected + "; got " + describe(v));
}

std::vector<ItemRef> parse_items(const Json::Value& v, const std::string& where, bool weighted,
                                 const RequestLimits& limits) {
    if (!v.isArray()) throw BadRequest(where + ": expected an array; got " + describe(v));
    if (v.size() > limits.max_items) {
        throw BadRequest(where + ": " + std::to_string(v.size()) + " entries; at most " +
                         std::to_string(limits.max_items) + " are taken");
    }
    std::vector<ItemRef> items;
    items.reserve(v.size());
    for (Json::ArrayIndex i = 0; i < v.size(); ++i) {
        items.push_back(parse_item(v[i], where + "[" + std::to_string(i) + "]", weighted));
    }
    return items;
}

bool parse_bool(const Json::Value& v, const std::string& where) {
    if (!v.isBool()) throw BadRequest(where + ": expected true or false; got " + describe(v));
    return v.asBool();
}

}  // namespace

Json::Value parse_json(const std::string& body) {
    if (body.empty()) throw BadRequest("request body: empty; expected a JSON document");
    Json::CharReaderBuilder builder;
    Json::CharReaderBuilder::strictMode(&builder.settings_);
    // Nesting deeper than any valid request needs (an item pair in a query in a batch is 4).
    builder["stackLimit"] = 32;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    Json::Value value;
    std::string errors;
    bool ok = false;
    try {
        ok = reader->parse(body.data(), body.data() + body.size(), &value, &errors);
    } catch (const Json::Exception& e) {  // the stack limit throws
        throw BadRequest(std::string("request body: invalid JSON: ") + e.what());
    }
    if (!ok) {
        // JsonCpp's "* Line 1, Column 7\n  Syntax error: ..." on one line.
        std::string message;
        std::istringstream lines(errors);
        for (std::string line; std::getline(lines, line);) {
            const size_t start = line.find_first_not_of(" *");
            if (start == std::string::npos) continue;
            message += (message.empty() ? "" : ": ") + line.substr(start);
        }
        throw BadRequest("request body: invalid JSON: " + message);
    }
    return value;
}

Query parse_query(const Json::Value& value, const RequestLimits& limits, const std::string& path) {
    const std::string self = path.empty() ? "request body" : path;
    if (!value.isObject()) {
        throw BadRequest(self + ": expected a query object {\"items\": [...], \"k\": 10}; got " +
                         describe(value));
    }
    for (const std::string& name : value.getMemberNames()) {
        if (name != "items" && name != "k" && name != "exclude" && name != "allow" &&
            name != "exclude_inputs" && name != "ignore_unknown") {
            throw BadRequest(self + ": unknown field " + write_json(Json::Value(name)) +
                             " (expected " + kQueryFields + ")");
        }
    }
    Query q;
    q.options.ignore_unknown = true;
    if (!value.isMember("items")) {
        throw BadRequest(field(path, "items") + ": missing; expected the user's items, an array");
    }
    q.items = parse_items(value["items"], field(path, "items"), true, limits);
    if (value.isMember("k")) {
        const Json::Value& k = value["k"];
        const std::string where = field(path, "k");
        const std::string range =
            "expected an integer from 1 to " + std::to_string(limits.max_k) + "; got ";
        if (!k.isIntegral()) throw BadRequest(where + ": " + range + describe(k));
        if ((k.isInt64() && k.asInt64() < 1) || !k.isUInt64() || k.asUInt64() > limits.max_k) {
            throw BadRequest(where + ": " + range + write_json(k));
        }
        q.options.k = static_cast<uint32_t>(k.asUInt64());
    }
    if (value.isMember("exclude")) {
        q.options.deny = parse_items(value["exclude"], field(path, "exclude"), false, limits);
    }
    if (value.isMember("allow")) {
        q.options.allow = parse_items(value["allow"], field(path, "allow"), false, limits);
    }
    if (value.isMember("exclude_inputs")) {
        q.options.exclude_inputs =
            parse_bool(value["exclude_inputs"], field(path, "exclude_inputs"));
    }
    if (value.isMember("ignore_unknown")) {
        q.options.ignore_unknown =
            parse_bool(value["ignore_unknown"], field(path, "ignore_unknown"));
    }
    return q;
}

std::vector<Query> parse_batch(const Json::Value& value, const RequestLimits& limits) {
    if (!value.isArray()) {
        throw BadRequest("request body: expected an array of query objects; got " +
                         describe(value));
    }
    if (value.empty()) throw BadRequest("request body: an empty batch; expected 1 query or more");
    if (value.size() > limits.max_batch) {
        throw BadRequest("request body: " + std::to_string(value.size()) + " queries; at most " +
                         std::to_string(limits.max_batch) + " per batch (--max-batch)");
    }
    std::vector<Query> queries;
    queries.reserve(value.size());
    for (Json::ArrayIndex i = 0; i < value.size(); ++i) {
        queries.push_back(parse_query(value[i], limits, "[" + std::to_string(i) + "]"));
    }
    return queries;
}

Json::Value to_json(const Recommendations& recs) {
    Json::Value out(Json::objectValue);
    Json::Value& items = out["items"] = Json::Value(Json::arrayValue);
    for (const Recommendation& r : recs.items) {
        Json::Value item(Json::objectValue);
        item["id"] = Json::UInt(r.id);
        item["name"] = r.name;
        item["score"] = static_cast<double>(r.score);
        items.append(std::move(item));
    }
    Json::Value& unknown = out["unknown"] = Json::Value(Json::arrayValue);
    for (const std::string& u : recs.unknown) unknown.append(u);
    return out;
}

std::string write_json(const Json::Value& value) {
    // One builder per thread: building the writer settles its settings once.
    thread_local const std::unique_ptr<Json::StreamWriter> writer = [] {
        Json::StreamWriterBuilder builder;
        builder["indentation"] = "";
        // 9 significant digits: the shortest that give back every float (scores are floats).
        builder["precision"] = 9;
        builder["precisionType"] = "significant";
        return std::unique_ptr<Json::StreamWriter>(builder.newStreamWriter());
    }();
    std::ostringstream out;
    writer->write(value, &out);
    return out.str();
}

std::string error_json(const std::string& message) {
    Json::Value v(Json::objectValue);
    v["error"] = message;
    return write_json(v);
}

}  // namespace sparsenet::cli::serve

#include "serve_request.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

namespace sparsenet::cli::serve {
namespace {

const char* kQueryFields = "items, k, exclude, allow, exclude_inputs, ignore_unknown";

// A JSON value for messages: its kind and its JSON text (escaped: a NUL or a newline in a name
// cannot cut or break the message), cut at kQuotedLimit characters.
std::string describe(const Json::Value& v) {
    switch (v.type()) {
        case Json::nullValue:
            return "null";
        case Json::booleanValue:
            return v.asBool() ? "true" : "false";
        case Json::intValue:
        case Json::uintValue:
            return "the integer " + quoted(v);
        case Json::realValue:
            return "the number " + quoted(v) + " (not an integer)";
        case Json::stringValue:
            return "the string " + quoted(v);
        case Json::arrayValue:
            return "the array " + quoted(v);
        case Json::objectValue:
            return "the object " + quoted(v);
    }
    return "a value";
}

// An integer as JSON wrote it: 3, not 3.0 or 3e0 (JsonCpp's isIntegral() takes those too).
bool is_integer(const Json::Value& v) {
    return v.type() == Json::intValue || v.type() == Json::uintValue;
}

std::string field(const std::string& path, const std::string& name) {
    return path.empty() ? name : path + "." + name;
}

// An item reference: a name, an id (integer >= 0) or, when `weighted`, [item, weight].
ItemRef parse_item(const Json::Value& v, const std::string& where, bool weighted) {
    const char* expected = weighted ? "expected a name (string), an id (integer >= 0) or "
                                      "[item, weight]"
                                    : "expected a name (string) or an id (integer >= 0)";
    if (v.isString()) {
        const std::string name = v.asString();
        // Names come from a features index (one per line, a tab before the index): a control
        // character cannot be part of one, and a NUL would cut the Recommender's messages.
        for (unsigned char c : name) {
            if (c < 0x20 || c == 0x7f) {
                throw BadRequest(where +
                                 ": a name holds no control characters (U+0000..U+001F, "
                                 "U+007F); got the string " +
                                 quoted(v));
            }
        }
        return ItemRef(name);
    }
    if (is_integer(v)) {
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

// A strict RFC 8259 syntax check ahead of JsonCpp, whose strict mode still takes comments between
// members, stops at a NUL byte (anything after it ignored), and takes invalid UTF-8 and lone
// surrogate escapes into strings. Throws BadRequest "invalid JSON at line L, column C: cause".
class SyntaxCheck {
  public:
    SyntaxCheck(const std::string& text, int max_depth) : s_(text), max_depth_(max_depth) {}

    void run() {
        space();
        value(0);
        space();
        if (at_ < s_.size()) fail("text after the JSON document (" + shown(at_) + ")");
    }

  private:
    [[noreturn]] void fail(const std::string& why) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < at_ && i < s_.size(); ++i) {
            if (s_[i] == '\n') {
                ++line;
                column = 1;
            } else if ((static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80) {
                ++column;  // a character, not a UTF-8 continuation byte
            }
        }
        throw BadRequest("request body: invalid JSON at line " + std::to_string(line) +
                         ", column " + std::to_string(column) + ": " + why);
    }
    // The byte at i for a message: the character, or its hex value when not printable ASCII.
    std::string shown(size_t i) const {
        const unsigned char c = static_cast<unsigned char>(s_[i]);
        if (c >= 0x20 && c < 0x7f) return std::string("'") + char(c) + "'";
        char buf[16];
        std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
        return buf;
    }
    bool end() const { return at_ >= s_.size(); }
    char peek() const { return end() ? '\0' : s_[at_]; }
    void space() {
        while (!end() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r'))
            ++at_;
    }
    void expect(char c, const char* what) {
        if (end()) fail(std::string("the body ends where ") + what + " was expected");
        if (s_[at_] != c) fail(std::string("expected ") + what + "; got " + shown(at_));
        ++at_;
    }
    void value(int depth) {
        if (end()) fail("the body ends where a value was expected");
        const char c = s_[at_];
        if (c == '{' || c == '[') {
            if (depth + 1 > max_depth_) {
                fail("nested deeper than " + std::to_string(max_depth_) + " levels");
            }
            ++at_;
            space();
            const char close = c == '{' ? '}' : ']';
            if (peek() == close) {
                ++at_;
                return;
            }
            for (;;) {
                if (c == '{') {
                    if (peek() != '"') {
                        if (end()) fail("the body ends where a member name was expected");
                        fail("expected a member name (a string); got " + shown(at_));
                    }
                    string();
                    space();
                    expect(':', "':' after the member name");
                    space();
                }
                value(depth + 1);
                space();
                if (peek() == ',') {
                    ++at_;
                    space();
                    continue;
                }
                expect(close, close == '}' ? "',' or '}'" : "',' or ']'");
                return;
            }
        }
        if (c == '"') return string();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        for (const char* word : {"true", "false", "null"}) {
            if (s_.compare(at_, std::strlen(word), word) == 0) {
                at_ += std::strlen(word);
                return;
            }
        }
        fail("expected a value (object, array, string, number, true, false or null); got " +
             shown(at_));
    }
    void digits() {
        if (end() || !std::isdigit(static_cast<unsigned char>(s_[at_]))) {
            fail(end() ? "the body ends inside a number" : "expected a digit; got " + shown(at_));
        }
        while (!end() && std::isdigit(static_cast<unsigned char>(s_[at_]))) ++at_;
    }
    void number() {
        if (peek() == '-') ++at_;
        if (peek() == '0') {
            ++at_;
            if (std::isdigit(static_cast<unsigned char>(peek()))) fail("a number with a leading 0");
        } else {
            digits();
        }
        if (peek() == '.') {
            ++at_;
            digits();
        }
        if (peek() == 'e' || peek() == 'E') {
            ++at_;
            if (peek() == '+' || peek() == '-') ++at_;
            digits();
        }
    }
    unsigned hex4() {
        unsigned v = 0;
        for (int i = 0; i < 4; ++i, ++at_) {
            if (end()) fail("the body ends inside a \\u escape");
            const char h = s_[at_];
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
                fail("expected 4 hex digits after \\u; got " + shown(at_));
            }
            v = v * 16 + unsigned(std::isdigit(static_cast<unsigned char>(h))
                                      ? h - '0'
                                      : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
        }
        return v;
    }
    void string() {
        ++at_;  // the opening quote
        for (;;) {
            if (end()) fail("the body ends inside a string");
            const unsigned char c = static_cast<unsigned char>(s_[at_]);
            if (c == '"') {
                ++at_;
                return;
            }
            if (c < 0x20) fail("a control character in a string (" + shown(at_) + "): escape it");
            if (c == '\\') {
                ++at_;
                const char e = peek();
                if (e == 'u') {
                    ++at_;
                    const unsigned u = hex4();
                    if (u >= 0xDC00 && u <= 0xDFFF) fail("a lone low surrogate escape (\\u)");
                    if (u >= 0xD800 && u <= 0xDBFF) {
                        if (s_.compare(at_, 2, "\\u") != 0) fail("a lone high surrogate escape");
                        at_ += 2;
                        const unsigned low = hex4();
                        if (low < 0xDC00 || low > 0xDFFF) fail("a lone high surrogate escape");
                    }
                    continue;
                }
                if (std::strchr("\"\\/bfnrt", e) == nullptr || e == '\0') {
                    fail(end() ? "the body ends inside a string"
                               : "an unknown escape \\" + std::string(1, e));
                }
                ++at_;
                continue;
            }
            if (c < 0x80) {
                ++at_;
                continue;
            }
            utf8();
        }
    }
    // One UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
    void utf8() {
        const unsigned char c = static_cast<unsigned char>(s_[at_]);
        int more = 0;
        unsigned cp = 0, min = 0;
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3, cp = c & 0x07, min = 0x10000;
        } else {
            fail("invalid UTF-8 (" + shown(at_) + ")");
        }
        for (int i = 1; i <= more; ++i) {
            if (at_ + i >= s_.size() || (static_cast<unsigned char>(s_[at_ + i]) & 0xC0) != 0x80) {
                fail("invalid UTF-8 (" + shown(at_) + " starts a sequence it does not finish)");
            }
            cp = cp << 6 | (static_cast<unsigned char>(s_[at_ + i]) & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            fail("invalid UTF-8 (an overlong form, a surrogate or a code point above U+10FFFF)");
        }
        at_ += size_t(more) + 1;
    }

    const std::string& s_;
    const int max_depth_;
    size_t at_ = 0;
};

}  // namespace

std::string quoted(const Json::Value& value) {
    std::string text = write_json(value);
    if (text.size() > kQuotedLimit) {
        text =
            text.substr(0, kQuotedLimit) + "... (" + std::to_string(text.size()) + " characters)";
    }
    return text;
}

std::string quoted(const std::string& text) {
    return quoted(Json::Value(text));
}

Json::Value parse_json(const std::string& body) {
    if (body.empty()) throw BadRequest("request body: empty; expected a JSON document");
    // Nesting deeper than any valid request needs (an item pair in a query in a batch is 4).
    constexpr int kMaxDepth = 32;
    SyntaxCheck(body, kMaxDepth).run();
    Json::CharReaderBuilder builder;
    Json::CharReaderBuilder::strictMode(&builder.settings_);
    builder["stackLimit"] = kMaxDepth + 1;
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
        if (!is_integer(k)) throw BadRequest(where + ": " + range + describe(k));
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
    // A SoftMax layer answered from the ANN index or the fp16 screen: the scores are logits.
    if (recs.logits) out["scores"] = "logits";
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
    v["error"] = message.size() <= kMessageLimit
                     ? message
                     : message.substr(0, kMessageLimit) + "... (" + std::to_string(message.size()) +
                           " characters)";
    return write_json(v);
}

}  // namespace sparsenet::cli::serve

// serve: answers recommendation queries, one JSON object per line on stdin, one JSON answer per
// line on stdout, with a sparsenet::Recommender loaded once.
//
//   serve MODEL.nc [FEATURES.index] [--threads N]
//
// Query:  {"items": ["a", "b", ["c", 2.5], 17], "k": 10, "allow": [...], "deny": [...],
//          "exclude_inputs": true, "ignore_unknown": false}
//         items are names (with a features index), ids, or [item, weight] pairs.
// Answer: {"items": [{"name": "x", "id": 3, "score": 0.97}, ...], "unknown": [...]}
//         or {"error": "message"} (the service goes on with the next line).
//
// The JSON reader below is deliberately small and self-contained (objects, arrays, strings with
// escapes, numbers, true/false/null), so the example needs nothing but sparsenet.
#include <sparsenet/error.h>
#include <sparsenet/recommender.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// ---- minimal JSON ----

struct Json {
    enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
    bool boolean = false;
    double number = 0.0;
    std::string text;
    std::vector<Json> items;
    std::map<std::string, Json> fields;
};

class Parser {
  public:
    explicit Parser(const std::string& s) : s_(s) {}

    Json document() {
        Json v = value(0);
        skip_space();
        if (pos_ != s_.size()) fail("unexpected text after the JSON value");
        return v;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        throw std::runtime_error("invalid JSON at offset " + std::to_string(pos_) + ": " + what);
    }
    void skip_space() {
        while (pos_ < s_.size() &&
               (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r' || s_[pos_] == '\n'))
            ++pos_;
    }
    bool eat(char c) {
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }
    bool literal(const char* word) {
        const std::string w(word);
        if (s_.compare(pos_, w.size(), w) != 0) return false;
        pos_ += w.size();
        return true;
    }

    Json value(int depth) {
        if (depth > 64) fail("nested too deeply");
        skip_space();
        if (pos_ >= s_.size()) fail("unexpected end of input");
        Json v;
        const char c = s_[pos_];
        if (c == '{') {
            ++pos_;
            v.kind = Json::kObject;
            if (eat('}')) return v;
            do {
                skip_space();
                if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a field name");
                std::string key = string();
                expect(':');
                v.fields[key] = value(depth + 1);
            } while (eat(','));
            expect('}');
        } else if (c == '[') {
            ++pos_;
            v.kind = Json::kArray;
            if (eat(']')) return v;
            do {
                v.items.push_back(value(depth + 1));
            } while (eat(','));
            expect(']');
        } else if (c == '"') {
            v.kind = Json::kString;
            v.text = string();
        } else if (literal("true")) {
            v.kind = Json::kBool;
            v.boolean = true;
        } else if (literal("false")) {
            v.kind = Json::kBool;
        } else if (literal("null")) {
            v.kind = Json::kNull;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            const char* begin = s_.c_str() + pos_;
            char* end = nullptr;
            v.kind = Json::kNumber;
            v.number = std::strtod(begin, &end);
            if (end == begin) fail("bad number");
            pos_ += size_t(end - begin);
        } else {
            fail(std::string("unexpected character '") + c + "'");
        }
        return v;
    }

    unsigned hex4() {
        if (pos_ + 4 > s_.size()) fail("short \\u escape");
        unsigned u = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = s_[pos_++];
            u <<= 4;
            if (h >= '0' && h <= '9') {
                u |= unsigned(h - '0');
            } else if (h >= 'a' && h <= 'f') {
                u |= unsigned(h - 'a' + 10);
            } else if (h >= 'A' && h <= 'F') {
                u |= unsigned(h - 'A' + 10);
            } else {
                fail("bad \\u escape");
            }
        }
        return u;
    }

    static void put_utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    }

    std::string string() {
        ++pos_;  // the opening quote
        std::string out;
        while (true) {
            if (pos_ >= s_.size()) fail("unterminated string");
            const char c = s_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) fail("unterminated escape");
            const char e = s_[pos_++];
            switch (e) {
                case '"':
                case '\\':
                case '/':
                    out += e;
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'u': {
                    unsigned cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
                        if (!literal("\\u")) fail("lone high surrogate");
                        const unsigned low = hex4();
                        if (low < 0xDC00 || low >= 0xE000) fail("bad low surrogate");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    } else if (cp >= 0xDC00 && cp < 0xE000) {
                        fail("lone low surrogate");
                    }
                    put_utf8(out, cp);
                    break;
                }
                default:
                    fail(std::string("bad escape '\\") + e + "'");
            }
        }
    }

    const std::string& s_;
    size_t pos_ = 0;
};

std::string quote(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

// ---- queries ----

sparsenet::ItemRef item_of(const Json& v, const std::string& where) {
    if (v.kind == Json::kString) return sparsenet::ItemRef(v.text);
    if (v.kind == Json::kNumber) {
        if (v.number != std::floor(v.number) || std::fabs(v.number) > 9.0e15) {
            throw std::runtime_error(where + ": item ids are integers");
        }
        return sparsenet::ItemRef(static_cast<int64_t>(v.number));
    }
    if (v.kind == Json::kArray && v.items.size() == 2 && v.items[1].kind == Json::kNumber) {
        sparsenet::ItemRef item = item_of(v.items[0], where);
        item.weight = static_cast<float>(v.items[1].number);
        return item;
    }
    throw std::runtime_error(where + ": expected a name, an id or an [item, weight] pair");
}

std::vector<sparsenet::ItemRef> items_of(const Json& query, const std::string& field) {
    std::vector<sparsenet::ItemRef> out;
    auto it = query.fields.find(field);
    if (it == query.fields.end()) return out;
    if (it->second.kind != Json::kArray)
        throw std::runtime_error("\"" + field + "\": expected an array");
    for (const Json& v : it->second.items) out.push_back(item_of(v, "\"" + field + "\""));
    return out;
}

bool flag(const Json& query, const std::string& field, bool fallback) {
    auto it = query.fields.find(field);
    if (it == query.fields.end()) return fallback;
    if (it->second.kind != Json::kBool)
        throw std::runtime_error("\"" + field + "\": expected true or false");
    return it->second.boolean;
}

std::string answer(const sparsenet::Recommender& recommender, const std::string& line) {
    const Json query = Parser(line).document();
    if (query.kind != Json::kObject) throw std::runtime_error("expected a JSON object per line");
    for (const auto& field : query.fields) {
        static const char* known[] = {"items",         "k", "allow", "deny", "exclude_inputs",
                                      "ignore_unknown"};
        bool ok = false;
        for (const char* k : known) ok = ok || field.first == k;
        if (!ok) throw std::runtime_error("unknown field \"" + field.first + "\"");
    }
    sparsenet::RecommendOptions options;
    auto k = query.fields.find("k");
    if (k != query.fields.end()) {
        if (k->second.kind != Json::kNumber || k->second.number < 1 || k->second.number > 1e6 ||
            k->second.number != std::floor(k->second.number)) {
            throw std::runtime_error("\"k\": expected an integer from 1 to 1000000");
        }
        options.k = static_cast<uint32_t>(k->second.number);
    }
    options.allow = items_of(query, "allow");
    options.deny = items_of(query, "deny");
    options.exclude_inputs = flag(query, "exclude_inputs", true);
    options.ignore_unknown = flag(query, "ignore_unknown", false);
    const sparsenet::Recommendations result =
        recommender.recommend(items_of(query, "items"), options);
    std::string out = "{\"items\":[";
    for (size_t i = 0; i < result.items.size(); ++i) {
        const sparsenet::Recommendation& r = result.items[i];
        char score[32];
        std::snprintf(score, sizeof score, "%.9g", double(r.score));  // round-trips a float
        out += (i ? "," : "") + std::string("{\"name\":") + quote(r.name) +
               ",\"id\":" + std::to_string(r.id) + ",\"score\":" + score + "}";
    }
    out += "],\"unknown\":[";
    for (size_t i = 0; i < result.unknown.size(); ++i)
        out += (i ? "," : "") + quote(result.unknown[i]);
    return out + "]}";
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> paths;
    sparsenet::RecommenderOptions options;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--threads" && i + 1 < argc) {
            options.threads_per_call = std::atoi(argv[++i]);
        } else if (arg == "-h" || arg == "--help") {
            std::cout << "usage: serve MODEL.nc [FEATURES.index] [--threads N]\n"
                         "reads one JSON query per line on stdin, writes one JSON answer per "
                         "line\n";
            return 0;
        } else {
            paths.push_back(arg);
        }
    }
    if (paths.empty() || paths.size() > 2) {
        std::cerr << "usage: serve MODEL.nc [FEATURES.index] [--threads N]\n";
        return 2;
    }
    if (paths.size() == 2) options.features_index = paths[1];
    try {
        const sparsenet::Recommender recommender(paths[0], options);
        std::string line;
        while (std::getline(std::cin, line)) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            std::string out;
            try {
                out = answer(recommender, line);
            } catch (const std::exception& e) {  // a bad query: say why and serve the next one
                out = "{\"error\":" + quote(e.what()) + "}";
            }
            std::cout << out << '\n' << std::flush;
        }
    } catch (const sparsenet::Error& e) {
        std::cerr << "serve: " << e.what() << '\n';
        return 1;
    }
    return 0;
}

// serve: answers recommendation queries, one JSON object per line on stdin, one JSON answer per
// line on stdout, with a sparsenet::Recommender loaded once. A minimal consumer of the installed
// package (JsonCpp reads and writes the JSON); for an HTTP service with reloads, health and
// metrics, run `sparsenet serve` (docs/serving.md).
//
//   serve MODEL.nc [FEATURES.index] [--threads N]
//
// Query:  {"items": ["a", "b", ["c", 2.5], 17], "k": 10, "allow": [...], "deny": [...],
//          "exclude_inputs": true, "ignore_unknown": false}
//         items are names (with a features index), ids, or [item, weight] pairs.
// Answer: {"items": [{"name": "x", "id": 3, "score": 0.97}, ...], "unknown": [...]}
//         or {"error": "message"} (the service goes on with the next line).
#include <json/json.h>
#include <sparsenet/error.h>
#include <sparsenet/recommender.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

sparsenet::ItemRef item_of(const Json::Value& v, const std::string& where) {
    if (v.isString()) return sparsenet::ItemRef(v.asString());
    if (v.isIntegral() && v.isInt64()) return sparsenet::ItemRef(v.asInt64());
    if (v.isArray() && v.size() == 2 && v[1].isNumeric() && !v[1].isBool()) {
        sparsenet::ItemRef item = item_of(v[0], where);
        item.weight = static_cast<float>(v[1].asDouble());
        return item;
    }
    throw std::runtime_error(where + ": expected a name, an id or an [item, weight] pair");
}

std::vector<sparsenet::ItemRef> items_of(const Json::Value& query, const char* field) {
    std::vector<sparsenet::ItemRef> out;
    if (!query.isMember(field)) return out;
    const Json::Value& list = query[field];
    if (!list.isArray())
        throw std::runtime_error(std::string("\"") + field + "\": expected an array");
    for (const Json::Value& v : list) out.push_back(item_of(v, std::string("\"") + field + "\""));
    return out;
}

bool flag(const Json::Value& query, const char* field, bool fallback) {
    if (!query.isMember(field)) return fallback;
    if (!query[field].isBool()) {
        throw std::runtime_error(std::string("\"") + field + "\": expected true or false");
    }
    return query[field].asBool();
}

Json::Value answer(const sparsenet::Recommender& recommender, const std::string& line) {
    Json::CharReaderBuilder builder;
    Json::CharReaderBuilder::strictMode(&builder.settings_);
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    Json::Value query;
    std::string errors;
    if (!reader->parse(line.data(), line.data() + line.size(), &query, &errors)) {
        throw std::runtime_error("invalid JSON: " + errors);
    }
    if (!query.isObject()) throw std::runtime_error("expected a JSON object per line");
    for (const std::string& field : query.getMemberNames()) {
        if (field != "items" && field != "k" && field != "allow" && field != "deny" &&
            field != "exclude_inputs" && field != "ignore_unknown") {
            throw std::runtime_error("unknown field \"" + field + "\"");
        }
    }
    sparsenet::RecommendOptions options;
    if (query.isMember("k")) {
        const Json::Value& k = query["k"];
        if (!k.isIntegral() || !k.isUInt64() || k.asUInt64() < 1 || k.asUInt64() > 1000000) {
            throw std::runtime_error("\"k\": expected an integer from 1 to 1000000");
        }
        options.k = static_cast<uint32_t>(k.asUInt64());
    }
    options.allow = items_of(query, "allow");
    options.deny = items_of(query, "deny");
    options.exclude_inputs = flag(query, "exclude_inputs", true);
    options.ignore_unknown = flag(query, "ignore_unknown", false);
    const sparsenet::Recommendations result =
        recommender.recommend(items_of(query, "items"), options);
    Json::Value out(Json::objectValue);
    out["items"] = Json::Value(Json::arrayValue);
    for (const sparsenet::Recommendation& r : result.items) {
        Json::Value item(Json::objectValue);
        item["name"] = r.name;
        item["id"] = r.id;
        item["score"] = static_cast<double>(r.score);
        out["items"].append(item);
    }
    out["unknown"] = Json::Value(Json::arrayValue);
    for (const std::string& u : result.unknown) out["unknown"].append(u);
    return out;
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
    Json::StreamWriterBuilder writer;
    writer["indentation"] = "";
    writer["precision"] = 9;  // 9 significant digits give back every float score
    writer["precisionType"] = "significant";
    try {
        const sparsenet::Recommender recommender(paths[0], options);
        std::string line;
        while (std::getline(std::cin, line)) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            Json::Value out;
            try {
                out = answer(recommender, line);
            } catch (const std::exception& e) {  // a bad query: say why and serve the next one
                out = Json::Value(Json::objectValue);
                out["error"] = e.what();
            }
            std::cout << Json::writeString(writer, out) << '\n' << std::flush;
        }
    } catch (const sparsenet::Error& e) {
        std::cerr << "serve: " << e.what() << '\n';
        return 1;
    }
    return 0;
}

#include "ranking_report.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <sstream>

#include "common.h"
#include "sparsenet/error.h"
#include "sparsenet/resources.h"

namespace sparsenet::cli {
namespace {

uint32_t parse_k(const std::string& text, const std::string& option) {
    uint64_t v = 0;
    bool ok = !text.empty() && text.size() <= 10;
    for (char c : text) {
        if (c < '0' || c > '9') ok = false;
        if (ok) v = v * 10 + uint64_t(c - '0');
    }
    if (!ok || v == 0 || v > UINT32_MAX) {
        throw Error(ErrorCategory::kUsage,
                    "option " + option + ": '" + text + "' is not a positive integer K");
    }
    return static_cast<uint32_t>(v);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

std::vector<uint32_t> parse_k_list(const std::string& text, const std::string& option) {
    std::vector<uint32_t> ks;
    for (const std::string& item : split_list(text, option)) {
        const uint32_t k = parse_k(item, option);
        if (std::find(ks.begin(), ks.end(), k) != ks.end()) {
            throw Error(ErrorCategory::kUsage,
                        "option " + option + ": K = " + item + " is listed twice");
        }
        ks.push_back(k);
    }
    return ks;
}

MetricSpec parse_metric_spec(const std::string& text, const std::string& option) {
    const size_t at = text.find('@');
    std::string known;
    for (const std::string& n : metric_names()) known += (known.empty() ? "" : ", ") + n;
    if (at == std::string::npos) {
        throw Error(ErrorCategory::kUsage, "option " + option + ": '" + text +
                                               "' is not METRIC@K (METRIC one of " + known + ")");
    }
    MetricSpec spec;
    spec.name = lower(text.substr(0, at));
    const auto& names = metric_names();
    if (std::find(names.begin(), names.end(), spec.name) == names.end()) {
        throw Error(ErrorCategory::kUsage, "option " + option + ": unknown metric '" +
                                               text.substr(0, at) + "'; expected one of " + known);
    }
    spec.k = parse_k(text.substr(at + 1), option);
    return spec;
}

std::string metric_title(const std::string& name, uint32_t k) {
    static const std::pair<const char*, const char*> titles[] = {
        {"recall", "Recall"}, {"nrecall", "nRecall"},  {"precision", "Precision"}, {"ndcg", "NDCG"},
        {"map", "MAP"},       {"hit_rate", "HitRate"}, {"coverage", "Coverage"}};
    for (const auto& t : titles) {
        if (name == t.first) return std::string(t.second) + "@" + std::to_string(k);
    }
    return name + "@" + std::to_string(k);
}

std::string metrics_table(const std::vector<std::pair<std::string, const RankingReport*>>& rows) {
    if (rows.empty()) return "";
    size_t label_width = 5;
    for (const auto& row : rows) label_width = std::max(label_width, row.first.size());
    // Columns come from the first report; every row was computed at the same K.
    std::vector<std::pair<std::string, uint32_t>> columns;
    for (const std::string& name : metric_names()) {
        for (const MetricsAtK& m : rows.front().second->at) columns.push_back({name, m.k});
    }
    std::string out(label_width, ' ');
    std::vector<size_t> widths;
    for (const auto& c : columns) {
        const std::string title = metric_title(c.first, c.second);
        widths.push_back(std::max<size_t>(title.size(), 6));
        out += "  " + std::string(widths.back() - title.size(), ' ') + title;
    }
    out += '\n';
    for (const auto& row : rows) {
        out += row.first + std::string(label_width - row.first.size(), ' ');
        for (size_t c = 0; c < columns.size(); ++c) {
            char value[32];
            std::snprintf(value, sizeof value, "%*.4f", int(widths[c]),
                          metric_value(row.second->at_k(columns[c].second), columns[c].first));
            out += "  ";
            out += value;
        }
        out += '\n';
    }
    return out;
}

std::string metrics_line(const RankingReport& report) {
    std::string out;
    for (const MetricsAtK& m : report.at) {
        for (const std::string& name : metric_names()) {
            char value[32];
            std::snprintf(value, sizeof value, " %.4f", metric_value(m, name));
            if (!out.empty()) out += "  ";
            out += metric_title(name, m.k) + value;
        }
    }
    return out + "  (" + std::to_string(report.users) + " users)";
}

Json::Value metrics_json(const RankingReport& report) {
    Json::Value v(Json::objectValue);
    v["users"] = Json::UInt64(report.users);
    v["rows"] = Json::UInt64(report.rows);
    v["items"] = Json::UInt(report.items);
    for (const MetricsAtK& m : report.at) {
        const std::string at = "@" + std::to_string(m.k);
        for (const std::string& name : metric_names()) v[name + at] = metric_value(m, name);
        v["covered_items" + at] = Json::UInt64(m.covered_items);
    }
    return v;
}

std::string json_text(const Json::Value& value, bool compact) {
    Json::StreamWriterBuilder builder;
    builder["indentation"] = compact ? "" : "  ";
    builder["precision"] = 17;
    return Json::writeString(builder, value);
}

void write_text_file(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* out = std::fopen(tmp.c_str(), "w");
    if (out == nullptr) throw Error(ErrorCategory::kIo, path + ": cannot write");
    const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size() &&
                    std::fflush(out) == 0 && std::ferror(out) == 0 && ::fsync(fileno(out)) == 0;
    std::fclose(out);
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path +
                                            ": write failed (a previous file of that name is "
                                            "left as it was)" +
                                            storage_hint(path));
    }
    sync_parent_directory(path);  // best effort: the file itself is whole either way
}

}  // namespace sparsenet::cli

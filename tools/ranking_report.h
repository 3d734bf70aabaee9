// What `evaluate` and `train --validate-*` share: K lists, METRIC@K specs, the metrics table,
// one-line summaries and the JSON form of a RankingReport.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparsenet/metrics.h"

namespace sparsenet::cli {

// "10,20,50" -> {10, 20, 50}: positive, distinct; Error(kUsage) naming `option` otherwise.
std::vector<uint32_t> parse_k_list(const std::string& text, const std::string& option);

struct MetricSpec {
    std::string name;  // lower case, one of metric_names()
    uint32_t k = 0;
};
// "recall@20", "NDCG@100" -> {name, k}; Error(kUsage) naming `option` otherwise.
MetricSpec parse_metric_spec(const std::string& text, const std::string& option);

// The column title of a metric: Recall@20, nRecall@20, Precision@20, NDCG@20, MAP@20, ...
std::string metric_title(const std::string& name, uint32_t k);

// One table: a row per (label, report), a column per metric and K (metric-major), 4 decimals.
std::string metrics_table(const std::vector<std::pair<std::string, const RankingReport*>>& rows);

// "Recall@20 0.1234  nRecall@20 ...  (N users)" on one line.
std::string metrics_line(const RankingReport& report);

// {"users": N, "rows": R, "items": I, "recall@20": x, ..., "covered_items@20": n}.
Json::Value metrics_json(const RankingReport& report);

// Compact (one line) or indented JSON text, doubles with 17 significant digits so that a
// reader gets back the exact value computed.
std::string json_text(const Json::Value& value, bool compact);

// Writes `text` to `path` through a temporary file and a rename; Error(kIo) naming the path.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace sparsenet::cli

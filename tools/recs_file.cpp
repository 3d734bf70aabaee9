#include "recs_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <unordered_map>

#include "sparsenet/error.h"

namespace sparsenet::cli {
namespace {

// A name -> position map from names by position, or, without names, decimal numbers below
// `count` (what predict writes without index files).
class Names {
  public:
    Names(const std::vector<std::string>* names, uint64_t count) : count_(count) {
        if (names == nullptr || names->empty()) return;
        count_ = names->size();
        map_.reserve(names->size());
        for (uint64_t i = 0; i < names->size(); ++i) map_.emplace((*names)[i], i);
        numeric_ = false;
    }
    // The position of `name`, or UINT64_MAX when unknown.
    uint64_t find(const std::string& name) const {
        if (!numeric_) {
            const auto it = map_.find(name);
            return it == map_.end() ? UINT64_MAX : it->second;
        }
        if (name.empty() || name.size() > 19 ||
            !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            return UINT64_MAX;
        }
        const uint64_t v = std::strtoull(name.c_str(), nullptr, 10);
        return v < count_ ? v : UINT64_MAX;
    }
    bool numeric() const { return numeric_; }
    uint64_t count() const { return count_; }

  private:
    std::unordered_map<std::string, uint64_t> map_;
    uint64_t count_ = 0;
    bool numeric_ = true;
};

}  // namespace

RecsFile read_recs(const std::string& path, const RecsReadOptions& o) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCategory::kIo, path + ": cannot open the recommendations file");
    const Names users(o.sample_names, o.rows);
    const Names items(o.feature_names, o.items);
    RecsFile f;
    f.top.rows = o.rows;
    f.top.k = o.k;
    f.top.scores.assign(o.rows * o.k, -std::numeric_limits<float>::infinity());
    f.top.indices.assign(o.rows * o.k, std::numeric_limits<uint32_t>::max());
    f.listed.assign(o.rows, false);
    // Users on a line so far, by position in the samples index (rows beyond o.rows included).
    std::vector<uint64_t> seen_on(users.count(), 0);
    std::vector<uint64_t> item_line(items.count(), 0);  // line that last listed the item
    std::string line;
    uint64_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        const std::string where = path + ":" + std::to_string(line_no) + ": ";
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) {
            throw Error(ErrorCategory::kData,
                        where + "expected 'user<TAB>item,score:item,score:...'; found no tab");
        }
        const std::string name = line.substr(0, tab);
        const uint64_t user = users.find(name);
        if (user == UINT64_MAX) {
            throw Error(ErrorCategory::kData,
                        where + "unknown user '" + name + "'; expected " +
                            (users.numeric() ? "a row number below " + std::to_string(o.rows)
                                             : std::string("a label of the samples index")));
        }
        if (seen_on[user] != 0) {
            throw Error(ErrorCategory::kData,
                        where + "user '" + name + "' already has a list on line " +
                            std::to_string(seen_on[user]) + "; expected one line per user");
        }
        seen_on[user] = line_no;
        f.lines++;
        const bool inside = user < o.rows;
        if (!inside)
            f.outside_rows++;
        else
            f.listed[user] = true;
        // The user's items in `drop` (sorted, as every CSR row).
        const uint32_t* drop_first = nullptr;
        const uint32_t* drop_last = nullptr;
        if (inside && o.drop != nullptr && user < o.drop->rows) {
            drop_first = o.drop->indices.data() + o.drop->offsets[user];
            drop_last = o.drop->indices.data() + o.drop->offsets[user + 1];
        }
        uint32_t kept = 0;
        uint64_t entries = 0;
        double previous = std::numeric_limits<double>::infinity();
        size_t pos = tab + 1;
        while (pos < line.size()) {
            size_t end = line.find(':', pos);
            if (end == std::string::npos) end = line.size();
            const std::string entry = line.substr(pos, end - pos);
            pos = end + 1;
            // DSSTNE ends each list with ':'; an empty entry is fine only there.
            if (entry.empty() && end == line.size() - 1) break;
            const size_t comma = entry.rfind(',');
            if (entry.empty() || comma == std::string::npos || comma == 0) {
                throw Error(ErrorCategory::kData, where + "entry " + std::to_string(entries + 1) +
                                                      " '" + entry + "': expected 'item,score'");
            }
            const std::string item_name = entry.substr(0, comma);
            const std::string score_text = entry.substr(comma + 1);
            char* score_end = nullptr;
            errno = 0;
            const double score = std::strtod(score_text.c_str(), &score_end);
            if (score_text.empty() || *score_end != '\0' || std::isnan(score) ||
                std::isspace(static_cast<unsigned char>(score_text[0]))) {
                throw Error(ErrorCategory::kData, where + "item '" + item_name + "': score '" +
                                                      score_text + "' is not a number");
            }
            if (score > previous) {
                throw Error(ErrorCategory::kData,
                            where + "item '" + item_name + "': score " + score_text +
                                " is above the previous one; expected scores in descending order");
            }
            previous = score;
            const uint64_t item = items.find(item_name);
            if (item == UINT64_MAX) {
                throw Error(
                    ErrorCategory::kData,
                    where + "unknown item '" + item_name + "'; expected " +
                        (items.numeric() ? "a column number below " + std::to_string(o.items)
                                         : std::string("a label of the features index")));
            }
            if (item_line[item] == line_no) {
                throw Error(ErrorCategory::kData, where + "item '" + item_name +
                                                      "' is listed twice; expected distinct "
                                                      "items per user");
            }
            item_line[item] = line_no;
            entries++;
            if (!inside) continue;
            if (drop_first != nullptr &&
                std::binary_search(drop_first, drop_last, static_cast<uint32_t>(item))) {
                f.dropped++;
                continue;
            }
            if (kept < o.k) {
                f.top.indices[user * o.k + kept] = static_cast<uint32_t>(item);
                f.top.scores[user * o.k + kept] = static_cast<float>(score);
                kept++;
            }
        }
        f.longest = std::max(f.longest, entries);
        if (inside && kept < o.k) f.short_lists++;
    }
    if (in.bad()) throw Error(ErrorCategory::kIo, path + ": read failed");
    return f;
}

}  // namespace sparsenet::cli

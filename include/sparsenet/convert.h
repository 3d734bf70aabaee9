// Text interaction files -> Dataset (the engine of `sparsenet convert` and `sparsenet split`).
// Formats, index semantics and error rules: docs/data-pipeline.md.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sparsenet/dataset.h"

namespace sparsenet {

// A samples or features index: label <-> dense index 0..size-1 (DSSTNE's index files).
class LabelIndex {
  public:
    static constexpr uint32_t kNotFound = UINT32_MAX;

    LabelIndex() = default;
    LabelIndex(const LabelIndex& other) { *this = other; }
    LabelIndex& operator=(const LabelIndex& other);
    LabelIndex(LabelIndex&&) = default;
    LabelIndex& operator=(LabelIndex&&) = default;

    // read_index (index_file.h) into a LabelIndex; errors name the file and line.
    static LabelIndex read(const std::string& path);
    // The labels "0", "1", ..., "n-1".
    static LabelIndex numeric(uint32_t n);
    void write(const std::string& path) const;

    size_t size() const { return labels_.size(); }
    const std::string& label(uint32_t index) const { return labels_[index]; }
    uint32_t find(std::string_view label) const;
    // The index of `label`, appending it when new.
    uint32_t insert(std::string_view label);
    // True when label i is the decimal number i for every i (a numeric-id index).
    bool is_numeric() const;
    // Appends "size()", "size()+1", ... until size() > id (numeric-id indexes only).
    void grow_numeric(uint32_t id);

  private:
    std::deque<std::string> labels_;  // a deque never moves its elements: the views stay valid
    std::unordered_map<std::string_view, uint32_t> map_;
};

enum class TextFormat {
    kAuto,       // from the file name, then from the first line
    kDsstne,     // sample<TAB>feature[,value]:feature[,value]:...
    kCsv,        // MovieLens ratings.csv: user,item,rating[,timestamp], optional header
    kTsv,        // MovieLens 100K u.data: user<TAB>item<TAB>rating<TAB>timestamp
    kDat,        // MovieLens 1M/10M ratings.dat: user::item::rating::timestamp
    kUserItems,  // LightGCN splits: user item item ...
};

const char* to_string(TextFormat format);
// "auto", "dsstne", "csv", "tsv", "dat", "user-items" ("lightgcn" is user-items); throws
// Error(kUsage) otherwise.
TextFormat parse_text_format(const std::string& name);
// The format of `path`: by its name (.csv, .dat, u.data/.tsv), else by its first line.
TextFormat detect_text_format(const std::string& path);

// How labels become indices.
enum class IdMode {
    kDefault,    // kNumeric for user-items, kFirstSeen otherwise
    kFirstSeen,  // new labels get the next index, in order of first appearance (DSSTNE)
    kNumeric,    // labels are non-negative integers used as the index itself
};

// "default", "numeric" or "first-seen"; throws Error(kUsage) otherwise.
IdMode parse_id_mode(const std::string& name);

// What to do with a feature that is not in a given (frozen) features index.
enum class UnknownFeatures { kError, kDrop };

struct ConvertOptions {
    TextFormat format = TextFormat::kAuto;
    bool analog = false;               // keep values (-t analog); indicator otherwise
    std::optional<double> min_rating;  // keep only interactions whose value >= this
    IdMode ids = IdMode::kDefault;
    bool grow_features = true;  // false: the features index is frozen (given with -f)
    UnknownFeatures unknown = UnknownFeatures::kError;  // when frozen
    bool grow_samples = true;  // false: a sample not in the index is an error
};

struct ConvertStats {
    uint64_t files = 0;
    uint64_t lines = 0;                 // non-empty lines read (the header included)
    uint64_t interactions = 0;          // stored nonzeros
    uint64_t below_min_rating = 0;      // interactions filtered out by min_rating
    uint64_t dropped_unknown = 0;       // interactions with a feature outside a frozen index
    uint64_t distinct_dropped = 0;      // distinct such features
    uint64_t new_samples = 0;           // labels appended to the samples index
    uint64_t new_features = 0;          // labels appended to the features index
    uint64_t samples_without_line = 0;  // index rows this input has no data for (empty rows)
    bool header_skipped = false;
    TextFormat format = TextFormat::kAuto;  // the format used (after detection)
    // Wall time of the phases: parallel parse, in-order index merge, CSR build and row sort.
    double parse_seconds = 0, merge_seconds = 0, build_seconds = 0;
};

// Interactions in file order: entry k is (sample[k], feature[k], value[k]), ids into the
// samples and features indexes.
struct Interactions {
    std::vector<uint32_t> sample, feature;
    std::vector<float> value;  // empty unless options.analog
};

// The first step of convert_text: parses the files, in order, growing the indexes as
// convert_text does, and checks that no (sample, feature) pair repeats.
Interactions read_interactions(const std::vector<std::string>& paths, const ConvertOptions& options,
                               LabelIndex& samples, LabelIndex& features,
                               ConvertStats* stats = nullptr);

// Builds a CSR dataset from (sample = row, feature = column[, value]) interactions in any order;
// rows < `rows`, columns < `cols`. A repeated (row, column) pair is Error(kData) naming both.
Dataset to_dataset(const Interactions& in, const std::string& name, uint64_t rows, uint32_t cols);

// Parses the files, in order, into one dataset named `name`. Row r is sample r of `samples`
// (every sample of the index gets a row, so files converted with the same samples index always
// align; new samples are appended at the end). Column c is feature c of `features`. Rows are
// sorted by column; a repeated (sample, feature) pair, a sample on two lines (line-per-sample
// formats), and every malformed line are errors naming the file and line.
Dataset convert_text(const std::vector<std::string>& paths, const std::string& name,
                     const ConvertOptions& options, LabelIndex& samples, LabelIndex& features,
                     ConvertStats* stats = nullptr);

// Writes `data` as text in `format` (dsstne, csv with a header, tsv, dat or user-items), with
// row r and column c labelled by their numbers (1-based for the MovieLens formats, as in
// MovieLens files). Ratings are the values, or for boolean data a rating in 3.0..5.0 derived
// from (r, c); timestamps are derived from (r, c). For `sparsenet generate --text` (tests and
// benchmarks of the converter). Written through a temporary file and renamed.
void write_text(const std::string& path, const Dataset& data, TextFormat format);

// The text files to read for `path`: itself, or when it is a directory the regular files in it
// (not recursive), sorted by name, as DSSTNE's generateNetCDF does.
std::vector<std::string> expand_input_paths(const std::string& path);
// The files of every path, in order.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths);

}  // namespace sparsenet

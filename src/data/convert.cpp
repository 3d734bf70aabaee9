// Text interaction files -> Dataset. The file is memory-mapped and cut into line-aligned chunks
// that are parsed in parallel; each chunk numbers its labels locally in first-seen order, and the
// chunks are then merged in file order, so the global numbering is exactly DSSTNE's first-seen
// order whatever the thread count. See docs/data-pipeline.md.
#include "sparsenet/convert.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <utility>

#include "common/resources.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"

namespace sparsenet {

// ---------------------------------------------------------------------------------------------
// LabelIndex

LabelIndex& LabelIndex::operator=(const LabelIndex& other) {
    if (this == &other) return *this;
    labels_ = other.labels_;
    map_.clear();
    map_.reserve(labels_.size());
    for (size_t i = 0; i < labels_.size(); ++i) map_.emplace(labels_[i], static_cast<uint32_t>(i));
    return *this;
}

LabelIndex LabelIndex::read(const std::string& path) {
    LabelIndex index;
    for (std::string& label : read_index(path)) index.insert(label);
    return index;
}

LabelIndex LabelIndex::numeric(uint32_t n) {
    LabelIndex index;
    if (n > 0) index.grow_numeric(n - 1);
    return index;
}

void LabelIndex::write(const std::string& path) const {
    write_index(path, std::vector<std::string>(labels_.begin(), labels_.end()));
}

uint32_t LabelIndex::find(std::string_view label) const {
    auto it = map_.find(label);
    return it == map_.end() ? kNotFound : it->second;
}

uint32_t LabelIndex::insert(std::string_view label) {
    auto it = map_.find(label);
    if (it != map_.end()) return it->second;
    if (labels_.size() >= kNotFound) {
        throw Error(ErrorCategory::kData, "an index cannot hold more than 2^32-1 labels");
    }
    const uint32_t id = static_cast<uint32_t>(labels_.size());
    labels_.emplace_back(label);
    map_.emplace(labels_.back(), id);
    return id;
}

bool LabelIndex::is_numeric() const {
    for (size_t i = 0; i < labels_.size(); ++i) {
        if (labels_[i] != std::to_string(i)) return false;
    }
    return true;
}

void LabelIndex::grow_numeric(uint32_t id) {
    while (labels_.size() <= id) insert(std::to_string(labels_.size()));
}

// ---------------------------------------------------------------------------------------------
// Formats

const char* to_string(TextFormat format) {
    switch (format) {
        case TextFormat::kAuto:
            return "auto";
        case TextFormat::kDsstne:
            return "dsstne";
        case TextFormat::kCsv:
            return "csv";
        case TextFormat::kTsv:
            return "tsv";
        case TextFormat::kDat:
            return "dat";
        case TextFormat::kUserItems:
            return "user-items";
    }
    return "?";
}

TextFormat parse_text_format(const std::string& name) {
    for (TextFormat f : {TextFormat::kAuto, TextFormat::kDsstne, TextFormat::kCsv, TextFormat::kTsv,
                         TextFormat::kDat, TextFormat::kUserItems}) {
        if (name == to_string(f)) return f;
    }
    if (name == "lightgcn") return TextFormat::kUserItems;  // LightGCN's train.txt / test.txt
    throw Error(ErrorCategory::kUsage,
                "unknown input format '" + name +
                    "'; expected auto, dsstne, csv, tsv, dat, user-items or lightgcn");
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_uint(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
    }
    return true;
}

bool is_number(std::string_view s) {
    double v;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && ptr == s.data() + s.size();
}

std::vector<std::string_view> split_on(std::string_view s, std::string_view sep) {
    std::vector<std::string_view> out;
    size_t pos = 0;
    while (true) {
        const size_t next = s.find(sep, pos);
        out.push_back(s.substr(pos, next == std::string_view::npos ? s.npos : next - pos));
        if (next == std::string_view::npos) return out;
        pos = next + sep.size();
    }
}

std::string show(std::string_view s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += '?';
        } else {
            out += c;
        }
        if (out.size() > 80) {
            out += "...";
            break;
        }
    }
    return out + "'";
}

// Offset of the first byte that is not valid UTF-8, or npos.
size_t invalid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = p[i];
        size_t extra = 0;
        uint32_t cp = 0;
        if (c < 0x80) {
            if (c == 0) return i;
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (i + extra >= s.size()) return i;
        for (size_t k = 1; k <= extra; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += extra + 1;
    }
    return std::string_view::npos;
}

}  // namespace

TextFormat detect_text_format(const std::string& path) {
    const std::string file = std::filesystem::path(path).filename().string();
    if (ends_with(file, ".csv")) return TextFormat::kCsv;
    if (ends_with(file, ".dat")) return TextFormat::kDat;
    if (ends_with(file, ".tsv") || file == "u.data" || ends_with(file, ".data")) {
        return TextFormat::kTsv;
    }
    // By content: the first non-empty line.
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        throw Error(ErrorCategory::kIo, path + ": cannot open: " + std::strerror(errno));
    }
    std::string line;
    char buf[4096];
    while (line.empty() && std::fgets(buf, sizeof buf, f) != nullptr) {
        line = buf;
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    }
    std::fclose(f);
    if (line.find('\t') != std::string::npos) {
        const auto fields = split_on(line, "\t");
        const bool numeric = fields.size() == 4 && std::all_of(fields.begin(), fields.end(),
                                                               [](auto s) { return is_number(s); });
        return numeric ? TextFormat::kTsv : TextFormat::kDsstne;
    }
    if (line.find("::") != std::string::npos) return TextFormat::kDat;
    if (line.find(',') != std::string::npos) return TextFormat::kCsv;
    if (line.find(' ') != std::string::npos) return TextFormat::kUserItems;
    throw Error(ErrorCategory::kData,
                path + ": cannot tell the input format from the file name or its first line " +
                    show(line) + "; give --format dsstne|csv|tsv|dat|user-items");
}

IdMode parse_id_mode(const std::string& name) {
    if (name == "default") return IdMode::kDefault;
    if (name == "numeric") return IdMode::kNumeric;
    if (name == "first-seen") return IdMode::kFirstSeen;
    throw Error(ErrorCategory::kUsage,
                "unknown id mode '" + name + "'; expected numeric or first-seen");
}

std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths) {
    std::vector<std::string> files;
    for (const std::string& p : paths) {
        for (std::string& f : expand_input_paths(p)) files.push_back(std::move(f));
    }
    return files;
}

std::vector<std::string> expand_input_paths(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
        if (!std::filesystem::exists(path, ec)) {
            throw Error(ErrorCategory::kIo, path + ": no such file or directory");
        }
        return {path};
    }
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name[0] == '.') continue;  // hidden files and editor droppings
        if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
    if (ec) throw Error(ErrorCategory::kIo, path + ": cannot list directory: " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw Error(ErrorCategory::kIo, path + ": directory holds no files");
    return files;
}

// Atomic replacement, as write_model: a temporary file flushed to the device and renamed over
// `path`; a failed write (a full disk, the file size limit) leaves a previous file as it was and
// no temporary file.
void write_text(const std::string& path, const Dataset& d, TextFormat format) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr)
        throw Error(ErrorCategory::kIo, path + ": cannot write: " + std::strerror(errno));
    auto fail = [&](const std::string& what) {
        const std::string reason = std::strerror(errno);
        const std::string hint = io::storage_hint(path);
        if (f != nullptr) std::fclose(f);
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path +
                                            ": not written (a previous file of that name is "
                                            "left as it was): " +
                                            what + ": " + reason + hint);
    };
    std::string buf;
    buf.reserve(size_t{1} << 22);
    char num[32];
    auto put_uint = [&](uint64_t v) {
        auto [end, ec] = std::to_chars(num, num + sizeof num, v);
        buf.append(num, end);
    };
    auto put_value = [&](uint64_t r, uint64_t k) {
        if (!d.is_boolean()) {
            auto [end, ec] = std::to_chars(num, num + sizeof num, d.values[k]);
            buf.append(num, end);
            return;
        }
        static const char* const kRatings[] = {"3.0", "3.5", "4.0", "4.5", "5.0"};
        buf += kRatings[(r * 2654435761u + d.indices[k] * 40503u) % 5];
    };
    auto flush = [&](bool force) {
        if (buf.size() < (size_t{1} << 22) && !force) return;
        if (std::fwrite(buf.data(), 1, buf.size(), f) != buf.size()) fail("writing " + tmp);
        buf.clear();
    };
    const char* sep = format == TextFormat::kTsv ? "\t" : format == TextFormat::kDat ? "::" : ",";
    if (format == TextFormat::kCsv) buf += "userId,movieId,rating,timestamp\n";
    for (uint64_t r = 0; r < d.rows; ++r) {
        if (format == TextFormat::kDsstne || format == TextFormat::kUserItems) {
            put_uint(r);
            buf += format == TextFormat::kDsstne ? '\t' : ' ';
            for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
                if (k > d.offsets[r]) buf += format == TextFormat::kDsstne ? ':' : ' ';
                put_uint(d.indices[k]);
                if (format == TextFormat::kDsstne && !d.is_boolean()) {
                    buf += ',';
                    put_value(r, k);
                }
            }
            if (format == TextFormat::kUserItems && d.row_length(r) == 0) buf.pop_back();
            buf += '\n';
        } else {
            for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
                put_uint(r + 1);
                buf += sep;
                put_uint(uint64_t{d.indices[k]} + 1);
                buf += sep;
                put_value(r, k);
                buf += sep;
                put_uint(1000000000 + (r * 7919 + d.indices[k] * 104729) % 400000000);
                buf += '\n';
            }
        }
        flush(false);
    }
    flush(true);
    if (std::fflush(f) != 0) fail("writing " + tmp);
    if (::fsync(fileno(f)) != 0) fail("flushing " + tmp + " to disk (fsync)");
    const int closed = std::fclose(f);
    f = nullptr;
    if (closed != 0) fail("closing " + tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming " + tmp + " to it");
    if (!io::sync_parent_directory(path)) {
        throw Error(ErrorCategory::kIo, path +
                                            ": written, but its directory could not be flushed to "
                                            "disk (fsync): " +
                                            std::strerror(errno));
    }
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A read-only memory map of a whole file.
class MappedFile {
  public:
    explicit MappedFile(const std::string& path) {
        const int fd = ::open(path.c_str(), O_RDONLY);
        if (fd < 0)
            throw Error(ErrorCategory::kIo, path + ": cannot open: " + std::strerror(errno));
        struct stat st;
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            throw Error(ErrorCategory::kIo, path + ": not a regular file");
        }
        size_ = static_cast<size_t>(st.st_size);
        if (size_ > 0) {
            void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                ::close(fd);
                throw Error(ErrorCategory::kIo, path + ": cannot map: " + std::strerror(errno));
            }
            ::madvise(p, size_, MADV_SEQUENTIAL);
            data_ = static_cast<const char*>(p);
        }
        ::close(fd);
    }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile() {
        if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
    }
    const char* data() const { return data_; }
    size_t size() const { return size_; }

  private:
    const char* data_ = nullptr;
    size_t size_ = 0;
};

// Labels of one chunk, numbered in first-seen order; views point into the mapped file. An
// open-addressing table (FNV-1a, linear probing): the converter's hottest loop.
class LocalLabels {
  public:
    std::vector<std::string_view> labels;
    std::vector<uint64_t> first_line;  // chunk-relative, 0-based

    // The id of `s`, and whether it is new.
    std::pair<uint32_t, bool> intern(std::string_view s, uint64_t line) {
        if (!labels.empty() && s == labels[last_]) return {last_, false};  // runs of one user
        if (2 * (labels.size() + 1) > slots_.size()) grow();
        const uint64_t h = hash(s);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            const uint64_t slot = slots_[i];
            if (slot == 0) {
                last_ = static_cast<uint32_t>(labels.size());
                slots_[i] = (h & ~uint64_t{0xffffffff}) | (uint64_t{last_} + 1);
                labels.push_back(s);
                first_line.push_back(line);
                return {last_, true};
            }
            const uint32_t id = static_cast<uint32_t>(slot & 0xffffffff) - 1;
            if ((slot >> 32) == (h >> 32) && labels[id] == s) {
                last_ = id;
                return {id, false};
            }
        }
    }

  private:
    static uint64_t hash(std::string_view s) {
        uint64_t h = 1469598103934665603ULL;
        for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ULL;
        return h ^ (h >> 29);
    }

    void grow() {
        const size_t size = std::max<size_t>(1024, slots_.size() * 2);
        slots_.assign(size, 0);
        mask_ = size - 1;
        for (uint32_t id = 0; id < labels.size(); ++id) {
            const uint64_t h = hash(labels[id]);
            size_t i = h & mask_;
            while (slots_[i] != 0) i = (i + 1) & mask_;
            slots_[i] = (h & ~uint64_t{0xffffffff}) | (uint64_t{id} + 1);
        }
    }

    std::vector<uint64_t> slots_;  // high 32 bits: hash; low 32 bits: id + 1 (0 = empty)
    size_t mask_ = 0;
    uint32_t last_ = 0;
};

constexpr const char* kUnknownHint =
    "merge new features into the index (-m) or drop them (--drop-unknown)";

struct ParseError {
    uint64_t line = 0;  // chunk-relative, 0-based
    std::string message;
};

// The parsed records of one chunk. Ids are local (first-seen mode) or the numbers themselves
// (numeric mode).
struct Chunk {
    const char* begin = nullptr;
    const char* end = nullptr;
    bool first_of_file = false;
    uint64_t newlines = 0;  // lines in the chunk, for absolute line numbers
    uint64_t nonempty = 0;
    LocalLabels samples, features;
    std::vector<uint32_t> sample, feature;
    std::vector<float> value;                                // analog only
    std::vector<uint64_t> record_line;                       // only when tracking lines
    std::vector<std::pair<uint32_t, uint64_t>> line_sample;  // line-per-sample formats
    uint32_t max_sample = 0, max_feature = 0;                // numeric mode
    bool any_sample = false, any_feature = false;
    uint64_t below_min = 0;
    uint64_t dropped = 0;  // numeric ids outside a frozen features index
    std::vector<uint32_t> dropped_ids;
    bool header = false;
    std::optional<ParseError> error;
};

struct Parser {
    TextFormat format;
    const ConvertOptions& options;
    bool numeric;
    bool track_lines;
    // Numeric ids: ids at or above these are outside a frozen index (UINT32_MAX: growable).
    uint32_t sample_limit = UINT32_MAX;
    uint32_t feature_limit = UINT32_MAX;

    [[noreturn]] static void fail(const std::string& message) { throw ParseError{0, message}; }

    uint32_t parse_id(std::string_view s, const char* what) const {
        uint32_t v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v == UINT32_MAX) {
            fail(std::string("bad ") + what + " id " + show(s) +
                 ": expected a non-negative integer below 4294967295 (numeric ids)");
        }
        return v;
    }

    static double parse_number(std::string_view s, const char* what) {
        double v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) ||
            std::fabs(v) > std::numeric_limits<float>::max()) {
            fail(std::string("bad number ") + show(s) + " for the " + what +
                 ": expected a finite decimal number");
        }
        return v;
    }

    // A label's local id; new labels are checked once (non-empty, valid UTF-8).
    static uint32_t intern(LocalLabels& labels, std::string_view s, uint64_t line,
                           const char* what) {
        if (s.empty()) fail(std::string("empty ") + what);
        const auto [id, inserted] = labels.intern(s, line);
        if (inserted) check_label(s, what);
        return id;
    }

    static void check_label(std::string_view s, const char* what) {
        if (s.empty()) fail(std::string("empty ") + what);
        const size_t bad = invalid_utf8(s);
        if (bad != std::string_view::npos) {
            fail(std::string(what) + " " + show(s) + " is not valid UTF-8 (byte " +
                 std::to_string(bad + 1) + ")");
        }
    }

    uint32_t numeric_sample(std::string_view sample) const {
        const uint32_t s = parse_id(sample, "sample");
        if (s >= sample_limit) {
            fail("sample id " + std::to_string(s) + " is not in the samples index (" +
                 std::to_string(sample_limit) + " samples)");
        }
        return s;
    }

    void add(Chunk& c, std::string_view sample, std::string_view feature, double value,
             uint64_t line) const {
        if (options.min_rating && value < *options.min_rating) {
            ++c.below_min;
            return;
        }
        uint32_t s, f;
        if (numeric) {
            s = numeric_sample(sample);
            f = parse_id(feature, "feature");
            if (f >= feature_limit) {
                if (options.unknown == UnknownFeatures::kDrop) {
                    ++c.dropped;
                    c.dropped_ids.push_back(f);
                    return;
                }
                fail("feature " + std::to_string(f) + " is not in the features index (" +
                     std::to_string(feature_limit) + " features); " + kUnknownHint);
            }
            c.max_sample = std::max(c.max_sample, s);
            c.max_feature = std::max(c.max_feature, f);
        } else {
            s = intern(c.samples, sample, line, "sample");
            f = intern(c.features, feature, line, "feature");
        }
        c.any_sample = c.any_feature = true;
        c.sample.push_back(s);
        c.feature.push_back(f);
        if (options.analog) c.value.push_back(static_cast<float>(value));
        if (track_lines) c.record_line.push_back(line);
    }

    // Records the sample of a line-per-sample line (so a line with no items still makes a row).
    void add_line_sample(Chunk& c, std::string_view sample, uint64_t line) const {
        uint32_t s;
        if (numeric) {
            s = numeric_sample(sample);
            c.max_sample = std::max(c.max_sample, s);
        } else {
            s = intern(c.samples, sample, line, "sample");
        }
        c.any_sample = true;
        c.line_sample.emplace_back(s, line);
    }

    void parse_dsstne(Chunk& c, std::string_view line, uint64_t n) const {
        const size_t tab = line.find('\t');
        if (tab == std::string_view::npos) {
            fail("missing tab: expected 'sample<TAB>feature[,value]:feature[,value]:...'");
        }
        const std::string_view sample = line.substr(0, tab);
        std::string_view rest = line.substr(tab + 1);
        if (rest.find('\t') != std::string_view::npos) {
            fail("a second tab: expected 'sample<TAB>feature[,value]:feature[,value]:...'");
        }
        add_line_sample(c, sample, n);
        if (!rest.empty() && rest.back() == ':') rest.remove_suffix(1);  // DSSTNE's recs style
        if (rest.empty()) return;
        size_t pos = 0;
        while (pos <= rest.size()) {
            size_t colon = rest.find(':', pos);
            if (colon == std::string_view::npos) colon = rest.size();
            const std::string_view element = rest.substr(pos, colon - pos);
            if (element.empty()) {
                fail("empty feature at column " + std::to_string(tab + 2 + pos) +
                     ": expected 'feature[,value]' between ':' separators");
            }
            const size_t comma = element.find(',');
            std::string_view feature = element.substr(0, comma);
            double value = 0.0;  // DSSTNE: a missing value is 0
            if (comma != std::string_view::npos) {
                const std::string_view v = element.substr(comma + 1);
                if (v.find(',') != std::string_view::npos) {
                    fail("feature " + show(feature) + " has more than one value " + show(element) +
                         ": expected 'feature[,value]'");
                }
                if (feature.empty()) fail("empty feature name in " + show(element));
                value = parse_number(v, ("value of feature " + show(feature)).c_str());
            } else if (options.min_rating) {
                fail("feature " + show(feature) + " has no value to compare with --min-rating");
            }
            add(c, sample, feature, value, n);
            pos = colon + 1;
        }
    }

    void parse_ratings(Chunk& c, std::string_view line, uint64_t n, std::string_view sep,
                       bool first_line_of_file) const {
        std::array<std::string_view, 4> fields;
        size_t count = 0;
        for (size_t pos = 0;;) {
            const size_t next = line.find(sep, pos);
            if (count < fields.size()) fields[count] = line.substr(pos, next - pos);
            ++count;
            if (next == std::string_view::npos) break;
            pos = next + sep.size();
        }
        if (first_line_of_file && format == TextFormat::kCsv && count >= 3 &&
            !is_number(fields[2])) {
            c.header = true;  // userId,movieId,rating,timestamp
            return;
        }
        if (count < 3 || count > 4) {
            const char* layout = format == TextFormat::kCsv ? "user,item,rating[,timestamp]"
                                 : format == TextFormat::kTsv
                                     ? "user<TAB>item<TAB>rating[<TAB>timestamp]"
                                     : "user::item::rating[::timestamp]";
            fail(std::string("expected '") + layout + "', got " + std::to_string(count) + " field" +
                 (count == 1 ? "" : "s"));
        }
        if (fields[0].empty()) fail("empty user");
        if (fields[1].empty()) fail("empty item");
        const double rating = parse_number(fields[2], "rating");
        if (count == 4 && !is_uint(fields[3])) {
            fail("bad timestamp " + show(fields[3]) + ": expected a non-negative integer");
        }
        add(c, fields[0], fields[1], rating, n);
    }

    void parse_user_items(Chunk& c, std::string_view line, uint64_t n) const {
        size_t pos = 0;
        bool first = true;
        std::string_view user;
        while (pos < line.size()) {
            while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
            if (pos >= line.size()) break;
            size_t end = pos;
            while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
            const std::string_view token = line.substr(pos, end - pos);
            if (first) {
                user = token;
                add_line_sample(c, user, n);
                first = false;
            } else {
                add(c, user, token, 1.0, n);
            }
            pos = end;
        }
    }

    void parse_line(Chunk& c, std::string_view line, uint64_t n, bool first_line_of_file) const {
        switch (format) {
            case TextFormat::kDsstne:
                parse_dsstne(c, line, n);
                break;
            case TextFormat::kCsv:
                parse_ratings(c, line, n, ",", first_line_of_file);
                break;
            case TextFormat::kTsv:
                parse_ratings(c, line, n, "\t", first_line_of_file);
                break;
            case TextFormat::kDat:
                parse_ratings(c, line, n, "::", first_line_of_file);
                break;
            case TextFormat::kUserItems:
                parse_user_items(c, line, n);
                break;
            case TextFormat::kAuto:
                fail("internal: format not resolved");
        }
    }

    void parse_chunk(Chunk& c) const {
        const char* p = c.begin;
        uint64_t n = 0;
        bool first_line = c.first_of_file;
        while (p < c.end) {
            const char* nl = static_cast<const char*>(std::memchr(p, '\n', c.end - p));
            const char* line_end = nl != nullptr ? nl : c.end;
            std::string_view line(p, line_end - p);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF
            if (!line.empty()) {
                ++c.nonempty;
                try {
                    if (std::memchr(line.data(), '\r', line.size()) != nullptr) {
                        fail(
                            "carriage return inside the line (only a CRLF line ending is "
                            "accepted)");
                    }
                    parse_line(c, line, n, first_line);
                } catch (ParseError& e) {
                    e.line = n;
                    c.error = std::move(e);
                    return;
                }
                first_line = false;
            }
            ++n;
            p = line_end + 1;
        }
        c.newlines = n;
    }
};

// Cuts [data, data+size) into line-aligned pieces of about `target` bytes.
std::vector<Chunk> make_chunks(const char* data, size_t size, size_t target) {
    std::vector<Chunk> chunks;
    size_t pos = 0;
    while (pos < size) {
        size_t end = std::min(size, pos + target);
        if (end < size) {
            const void* nl = std::memchr(data + end, '\n', size - end);
            end = nl != nullptr ? static_cast<const char*>(nl) - data + 1 : size;
        }
        Chunk c;
        c.begin = data + pos;
        c.end = data + end;
        c.first_of_file = chunks.empty();
        chunks.push_back(std::move(c));
        pos = end;
    }
    return chunks;
}

bool line_per_sample(TextFormat f) {
    return f == TextFormat::kDsstne || f == TextFormat::kUserItems;
}

// Where each global sample was first given a line (line-per-sample formats).
struct SampleLines {
    std::vector<uint32_t> file;  // 0 = no line yet, else file number + 1
    std::vector<uint64_t> line;  // 1-based

    void check(uint32_t sample, uint32_t file_no, uint64_t line_no,
               const std::vector<std::string>& paths, const LabelIndex& samples) {
        if (sample >= file.size()) {
            file.resize(static_cast<size_t>(sample) + 1, 0);
            line.resize(static_cast<size_t>(sample) + 1, 0);
        }
        if (file[sample] != 0) {
            const std::string& first = paths[file[sample] - 1];
            throw Error(ErrorCategory::kData,
                        paths[file_no] + ":" + std::to_string(line_no) + ": sample " +
                            show(samples.label(sample)) + " already has a line (" +
                            (file[sample] - 1 == file_no ? "line " : first + ":") +
                            std::to_string(line[sample]) + "); each sample must be on one line");
        }
        file[sample] = file_no + 1;
        line[sample] = line_no;
    }
};

class Converter {
  public:
    Converter(const std::vector<std::string>& paths, const ConvertOptions& options,
              LabelIndex& samples, LabelIndex& features, ConvertStats& stats)
        : paths_(paths), options_(options), samples_(samples), features_(features), stats_(stats) {}

    Interactions run() {
        for (size_t i = 0; i < paths_.size(); ++i) convert_file(static_cast<uint32_t>(i));
        return std::move(records_);
    }

    TextFormat format_of(size_t file) const {
        return options_.format == TextFormat::kAuto ? detect_text_format(paths_[file])
                                                    : options_.format;
    }

    bool numeric_for(TextFormat f) const {
        return options_.ids == IdMode::kNumeric ||
               (options_.ids == IdMode::kDefault && f == TextFormat::kUserItems);
    }

    // Parses file `file` with one chunk per ~4 MB. Throws the first error in file order.
    std::vector<Chunk> parse(uint32_t file, const MappedFile& map, TextFormat format,
                             bool track_lines) const {
        std::vector<Chunk> chunks = make_chunks(map.data(), map.size(), size_t{4} << 20);
        Parser parser{format, options_, numeric_for(format), track_lines};
        if (!options_.grow_samples) parser.sample_limit = static_cast<uint32_t>(samples_.size());
        if (!options_.grow_features) {
            parser.feature_limit = static_cast<uint32_t>(features_.size());
        }
        const int64_t count = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t i = 0; i < count; ++i) parser.parse_chunk(chunks[i]);
        uint64_t first_line = 1;
        for (Chunk& c : chunks) {
            if (c.error) {
                throw Error(ErrorCategory::kData, paths_[file] + ":" +
                                                      std::to_string(first_line + c.error->line) +
                                                      ": " + c.error->message);
            }
            first_line += c.newlines;
        }
        return chunks;
    }

  private:
    std::string where(uint32_t file, uint64_t line) const {
        return paths_[file] + ":" + std::to_string(line) + ": ";
    }

    // Global id of a first-seen sample label, appended to the index when allowed.
    uint32_t global_sample(std::string_view label, uint32_t file, uint64_t line) {
        uint32_t id = samples_.find(label);
        if (id != LabelIndex::kNotFound) return id;
        if (!options_.grow_samples) {
            throw Error(ErrorCategory::kData, where(file, line) + "sample " + show(label) +
                                                  " is not in the samples index (" +
                                                  std::to_string(samples_.size()) + " samples)");
        }
        ++stats_.new_samples;
        return samples_.insert(label);
    }

    // Global id of a first-seen feature label; kNotFound when dropped.
    uint32_t global_feature(std::string_view label, uint32_t file, uint64_t line) {
        const uint32_t id = features_.find(label);
        if (id != LabelIndex::kNotFound) return id;
        if (options_.grow_features) {
            ++stats_.new_features;
            return features_.insert(label);
        }
        if (options_.unknown == UnknownFeatures::kDrop) {
            ++stats_.distinct_dropped;
            return LabelIndex::kNotFound;
        }
        throw Error(ErrorCategory::kData, where(file, line) + "feature " + show(label) +
                                              " is not in the features index (" +
                                              std::to_string(features_.size()) + " features); " +
                                              kUnknownHint);
    }

    void grow_numeric(LabelIndex& index, uint32_t max_id, uint64_t& added) {
        if (max_id >= index.size()) {
            added += max_id + 1 - index.size();
            index.grow_numeric(max_id);
        }
    }

    void convert_file(uint32_t file) {
        const TextFormat format = format_of(file);
        if (stats_.format == TextFormat::kAuto) stats_.format = format;
        if (format == TextFormat::kUserItems && options_.analog) {
            throw Error(ErrorCategory::kUsage,
                        paths_[file] + ": the user-items format has no values (use indicator)");
        }
        if (format == TextFormat::kUserItems && options_.min_rating) {
            throw Error(ErrorCategory::kUsage,
                        paths_[file] + ": the user-items format has no ratings for --min-rating");
        }
        const bool numeric = numeric_for(format);
        for (const auto& [index, what] :
             {std::pair<const LabelIndex*, const char*>{&samples_, "samples"},
              {&features_, "features"}}) {
            if (numeric && !index->is_numeric()) {
                throw Error(ErrorCategory::kData,
                            paths_[file] + ": numeric ids need a numeric " + what +
                                " index (label i is the number i), and the one given is not; "
                                "use first-seen ids (--ids first-seen)");
            }
        }
        MappedFile map(paths_[file]);
        auto start = std::chrono::steady_clock::now();
        std::vector<Chunk> chunks = parse(file, map, format, false);
        stats_.parse_seconds += seconds_since(start);
        start = std::chrono::steady_clock::now();
        ++stats_.files;

        uint64_t first_line = 1;
        std::vector<uint32_t> sample_map, feature_map;
        for (Chunk& c : chunks) {
            stats_.lines += c.nonempty;
            stats_.below_min_rating += c.below_min;
            stats_.dropped_unknown += c.dropped;
            stats_.header_skipped = stats_.header_skipped || c.header;
            dropped_ids_.insert(dropped_ids_.end(), c.dropped_ids.begin(), c.dropped_ids.end());
            // Local -> global ids, in local first-seen order (= file order).
            if (numeric) {
                if (c.any_sample) grow_numeric(samples_, c.max_sample, stats_.new_samples);
                if (c.any_feature) grow_numeric(features_, c.max_feature, stats_.new_features);
            } else {
                sample_map.resize(c.samples.labels.size());
                for (size_t i = 0; i < sample_map.size(); ++i) {
                    sample_map[i] = global_sample(c.samples.labels[i], file,
                                                  first_line + c.samples.first_line[i]);
                }
                feature_map.resize(c.features.labels.size());
                for (size_t i = 0; i < feature_map.size(); ++i) {
                    feature_map[i] = global_feature(c.features.labels[i], file,
                                                    first_line + c.features.first_line[i]);
                }
            }
            if (line_per_sample(format)) {
                for (const auto& [s, line] : c.line_sample) {
                    const uint32_t g = numeric ? s : sample_map[s];
                    sample_lines_.check(g, file, first_line + line, paths_, samples_);
                }
            }
            for (size_t k = 0; k < c.sample.size(); ++k) {
                const uint32_t f = numeric ? c.feature[k] : feature_map[c.feature[k]];
                if (f == LabelIndex::kNotFound) {
                    ++stats_.dropped_unknown;
                    continue;
                }
                records_.sample.push_back(numeric ? c.sample[k] : sample_map[c.sample[k]]);
                records_.feature.push_back(f);
                if (options_.analog) records_.value.push_back(c.value[k]);
            }
            first_line += c.newlines;
            c = Chunk{};  // free the chunk's records early
        }
        std::sort(dropped_ids_.begin(), dropped_ids_.end());
        dropped_ids_.erase(std::unique(dropped_ids_.begin(), dropped_ids_.end()),
                           dropped_ids_.end());
        stats_.merge_seconds += seconds_since(start);
    }

  public:
    uint64_t distinct_numeric_dropped() const {
        return dropped_ids_.size();
    }

  private:
    const std::vector<std::string>& paths_;
    const ConvertOptions& options_;
    LabelIndex& samples_;
    LabelIndex& features_;
    ConvertStats& stats_;
    SampleLines sample_lines_;
    Interactions records_;
    std::vector<uint32_t> dropped_ids_;  // numeric ids outside a frozen features index
};

// Finds the lines holding (sample, feature) to report a repeated interaction.
std::string locate_pair(const std::vector<std::string>& paths, const ConvertOptions& options,
                        const LabelIndex& samples, const LabelIndex& features,
                        const std::string& sample, const std::string& feature) {
    LabelIndex s = samples, f = features;  // the converter needs them but changes nothing here
    ConvertStats stats;
    const Converter conv(paths, options, s, f, stats);
    std::vector<std::pair<uint32_t, uint64_t>> found;  // (file, line)
    for (uint32_t file = 0; file < paths.size() && found.size() < 2; ++file) {
        const TextFormat format = conv.format_of(file);
        const bool numeric = conv.numeric_for(format);
        MappedFile map(paths[file]);
        const std::vector<Chunk> chunks = conv.parse(file, map, format, true);
        uint64_t first_line = 1;
        for (const Chunk& c : chunks) {
            for (size_t k = 0; k < c.sample.size() && found.size() < 2; ++k) {
                const bool match = numeric ? std::to_string(c.sample[k]) == sample &&
                                                 std::to_string(c.feature[k]) == feature
                                           : c.samples.labels[c.sample[k]] == sample &&
                                                 c.features.labels[c.feature[k]] == feature;
                if (match) found.emplace_back(file, first_line + c.record_line[k]);
            }
            first_line += c.newlines;
        }
    }
    if (found.size() < 2) return "";  // not reached: the pair was seen twice
    const auto [file1, line1] = found[0];
    const auto [file2, line2] = found[1];
    std::string where = paths[file2] + ":" + std::to_string(line2) + ": ";
    if (file1 == file2 && line1 == line2) return where + "(twice on this line) ";
    if (file1 == file2) return where + "(also on line " + std::to_string(line1) + ") ";
    return where + "(also at " + paths[file1] + ":" + std::to_string(line1) + ") ";
}

}  // namespace

namespace {

// CSR of interactions: rows sorted by column. Returns the first row holding a repeated column
// (rows when none).
uint64_t build_csr(const Interactions& in, bool analog, Dataset& d) {
    const size_t nnz = in.sample.size();
    d.offsets.assign(d.rows + 1, 0);
    for (uint32_t s : in.sample) ++d.offsets[s + 1];
    for (uint64_t r = 0; r < d.rows; ++r) d.offsets[r + 1] += d.offsets[r];
    d.indices.resize(nnz);
    d.values.clear();
    if (analog) d.values.resize(nnz);
    {
        std::vector<uint64_t> next(d.offsets.begin(), d.offsets.end() - 1);
        for (size_t k = 0; k < nnz; ++k) {
            const uint64_t at = next[in.sample[k]]++;
            d.indices[at] = in.feature[k];
            if (analog) d.values[at] = in.value[k];
        }
    }
    const int64_t rows = static_cast<int64_t>(d.rows);
    int64_t first_bad = rows;
#pragma omp parallel for schedule(dynamic, 256) reduction(min : first_bad)
    for (int64_t r = 0; r < rows; ++r) {
        const uint64_t b = d.offsets[r], e = d.offsets[r + 1];
        if (analog) {
            std::vector<std::pair<uint32_t, float>> pairs(e - b);
            for (uint64_t k = b; k < e; ++k) pairs[k - b] = {d.indices[k], d.values[k]};
            std::stable_sort(pairs.begin(), pairs.end(),
                             [](const auto& x, const auto& y) { return x.first < y.first; });
            for (uint64_t k = b; k < e; ++k) {
                d.indices[k] = pairs[k - b].first;
                d.values[k] = pairs[k - b].second;
            }
        } else {
            std::sort(d.indices.begin() + b, d.indices.begin() + e);
        }
        for (uint64_t k = b + 1; k < e; ++k) {
            if (d.indices[k] == d.indices[k - 1]) {
                first_bad = std::min(first_bad, r);
                break;
            }
        }
    }
    return static_cast<uint64_t>(first_bad);
}

[[noreturn]] void repeated_pair(const Dataset& d, uint64_t r, const std::vector<std::string>& paths,
                                const ConvertOptions& options, const LabelIndex& samples,
                                const LabelIndex& features) {
    uint32_t col = 0;
    for (uint64_t k = d.offsets[r] + 1; k < d.offsets[r + 1]; ++k) {
        if (d.indices[k] == d.indices[k - 1]) col = d.indices[k];
    }
    const std::string sample = samples.label(static_cast<uint32_t>(r));
    const std::string feature = features.label(col);
    throw Error(ErrorCategory::kData,
                locate_pair(paths, options, samples, features, sample, feature) + "sample " +
                    show(sample) + " has feature " + show(feature) +
                    " more than once; each interaction must appear once");
}

Interactions read_unchecked(const std::vector<std::string>& paths, const ConvertOptions& options,
                            LabelIndex& samples, LabelIndex& features, ConvertStats& stats) {
    if (paths.empty()) throw Error(ErrorCategory::kUsage, "no input files");
    Converter conv(paths, options, samples, features, stats);
    Interactions in = conv.run();
    stats.distinct_dropped += conv.distinct_numeric_dropped();
    stats.interactions = in.sample.size();
    if (features.size() > UINT32_MAX)
        throw Error(ErrorCategory::kData, "more than 2^32-1 features");
    return in;
}

}  // namespace

Interactions read_interactions(const std::vector<std::string>& paths, const ConvertOptions& options,
                               LabelIndex& samples, LabelIndex& features, ConvertStats* stats_out) {
    ConvertStats stats;
    Interactions in = read_unchecked(paths, options, samples, features, stats);
    Dataset d;
    d.rows = samples.size();
    d.cols = static_cast<uint32_t>(features.size());
    Interactions ids{in.sample, in.feature, {}};
    const uint64_t bad = build_csr(ids, false, d);
    if (bad < d.rows) repeated_pair(d, bad, paths, options, samples, features);
    if (stats_out != nullptr) *stats_out = stats;
    return in;
}

Dataset to_dataset(const Interactions& in, const std::string& name, uint64_t rows, uint32_t cols) {
    Dataset d;
    d.name = name;
    d.rows = rows;
    d.cols = cols;
    for (size_t k = 0; k < in.sample.size(); ++k) {
        if (in.sample[k] >= rows || in.feature[k] >= cols) {
            throw Error(ErrorCategory::kInternal,
                        "dataset " + name + ": interaction (" + std::to_string(in.sample[k]) +
                            ", " + std::to_string(in.feature[k]) + ") outside " +
                            std::to_string(rows) + " x " + std::to_string(cols));
        }
    }
    const uint64_t bad = build_csr(in, !in.value.empty(), d);
    if (bad < rows) {
        uint32_t col = 0;
        for (uint64_t k = d.offsets[bad] + 1; k < d.offsets[bad + 1]; ++k) {
            if (d.indices[k] == d.indices[k - 1]) col = d.indices[k];
        }
        throw Error(ErrorCategory::kData, "dataset " + name + ": row " + std::to_string(bad) +
                                              " has column " + std::to_string(col) +
                                              " more than once");
    }
    return d;
}

Dataset convert_text(const std::vector<std::string>& paths, const std::string& name,
                     const ConvertOptions& options, LabelIndex& samples, LabelIndex& features,
                     ConvertStats* stats_out) {
    ConvertStats stats;
    Interactions in = read_unchecked(paths, options, samples, features, stats);
    Dataset d;
    d.name = name;
    d.rows = samples.size();
    d.cols = static_cast<uint32_t>(features.size());
    const auto start = std::chrono::steady_clock::now();
    const uint64_t bad = build_csr(in, options.analog, d);
    stats.build_seconds = seconds_since(start);
    in = Interactions{};
    if (bad < d.rows) repeated_pair(d, bad, paths, options, samples, features);
    for (uint64_t r = 0; r < d.rows; ++r) {
        if (d.offsets[r + 1] == d.offsets[r]) ++stats.samples_without_line;
    }
    if (stats_out != nullptr) *stats_out = stats;
    return d;
}

}  // namespace sparsenet

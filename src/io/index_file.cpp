#include "sparsenet/index_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <utility>

#include "common/resources.h"
#include "sparsenet/error.h"

namespace sparsenet {

std::vector<std::string> read_index(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCategory::kIo, path + ": cannot open index file");
    // (index, label) in file order; an index's line in `line_of`. Nothing is sized by an index
    // itself: one line "a<TAB>4000000000" must be an error, not a 4-billion-entry allocation.
    std::vector<std::pair<uint32_t, std::string>> entries;
    std::unordered_map<uint32_t, uint64_t> line_of;
    uint32_t max_index = 0;
    std::unordered_map<std::string, uint64_t> seen;
    std::string line;
    uint64_t line_no = 0;
    while (std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        const std::string where = path + ":" + std::to_string(line_no) + ": ";
        const size_t tab = line.find('\t');
        if (tab == std::string::npos || line.find('\t', tab + 1) != std::string::npos) {
            throw Error(ErrorCategory::kData,
                        where + "expected 'label<TAB>index', got '" + line + "'");
        }
        const std::string label = line.substr(0, tab);
        const std::string number = line.substr(tab + 1);
        char* end = nullptr;
        errno = 0;
        const unsigned long long index = std::strtoull(number.c_str(), &end, 10);
        if (label.empty() || number.empty() || number[0] == '-' || *end != '\0' || errno != 0 ||
            index > UINT32_MAX) {
            throw Error(ErrorCategory::kData, where +
                                                  "expected 'label<TAB>index' with a "
                                                  "non-negative integer index, got '" +
                                                  line + "'");
        }
        auto [it, inserted] = seen.emplace(label, line_no);
        if (!inserted) {
            throw Error(ErrorCategory::kData, where + "label '" + label +
                                                  "' already appeared on line " +
                                                  std::to_string(it->second));
        }
        if (!line_of.emplace(static_cast<uint32_t>(index), line_no).second) {
            throw Error(ErrorCategory::kData,
                        where + "index " + number + " is given to two labels");
        }
        max_index = std::max(max_index, static_cast<uint32_t>(index));
        entries.emplace_back(static_cast<uint32_t>(index), label);
    }
    // The indices are distinct: they are 0..n-1 exactly when the largest is n-1.
    if (!entries.empty() && max_index != entries.size() - 1) {
        std::vector<uint32_t> indices;
        indices.reserve(entries.size());
        for (const auto& e : entries) indices.push_back(e.first);
        std::sort(indices.begin(), indices.end());
        uint32_t missing = 0;
        while (missing < indices.size() && indices[missing] == missing) ++missing;
        throw Error(ErrorCategory::kData, path + ": index " + std::to_string(missing) +
                                              " has no label; expected indices 0.." +
                                              std::to_string(max_index));
    }
    std::vector<std::string> labels(entries.size());
    for (auto& e : entries) labels[e.first] = std::move(e.second);
    return labels;
}

void write_index(const std::string& path, const std::vector<std::string>& labels) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    {
        std::ofstream out(tmp);
        if (!out) throw Error(ErrorCategory::kIo, path + ": cannot write index file");
        for (size_t i = 0; i < labels.size(); ++i) out << labels[i] << '\t' << i << '\n';
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw Error(ErrorCategory::kIo, path +
                                                ": write failed (a previous file of that name "
                                                "is left as it was)" +
                                                io::storage_hint(path));
        }
    }
    // On the device before the rename, and the rename itself after it: a crash leaves the old
    // index or the new one, never an empty file under the name.
    if (!io::sync_path(tmp, false)) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path + ": cannot flush to disk (fsync): " + why);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path + ": " + ec.message());
    }
    if (!io::sync_parent_directory(path)) {
        throw Error(ErrorCategory::kIo, path +
                                            ": written, but its directory could not be "
                                            "flushed to disk (fsync): " +
                                            std::strerror(errno));
    }
}

}  // namespace sparsenet

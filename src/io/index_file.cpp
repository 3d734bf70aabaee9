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
#include "io/names_variable.h"
#include "io/netcdf_util.h"
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

namespace io {

namespace {

std::string joined(const std::vector<std::string>& labels) {
    std::string text;
    for (const std::string& l : labels) {
        text += l;
        text += '\n';
    }
    return text;
}

}  // namespace

int define_names(int nc, const std::string& path, const std::string& var,
                 const std::vector<std::string>& labels) {
    size_t length = 0;
    for (const std::string& l : labels) {
        if (l.find('\n') != std::string::npos) {
            throw Error(ErrorCategory::kData,
                        path + ": label '" + l + "' holds a line break; expected one line each");
        }
        length += l.size() + 1;
    }
    int dim = -1, id = -1;
    const std::string dim_name = var + "Length";
    nc_check(nc_def_dim(nc, dim_name.c_str(), std::max<size_t>(length, 1), &dim), path,
             "defining dimension '" + dim_name + "'");
    nc_check(nc_def_var(nc, var.c_str(), NC_CHAR, 1, &dim, &id), path,
             "defining variable '" + var + "'");
    nc_check(nc_def_var_deflate(nc, id, /*shuffle=*/0, /*deflate=*/1, /*level=*/1), path,
             "compressing variable '" + var + "'");
    return id;
}

void put_names(int nc, const std::string& path, int var_id,
               const std::vector<std::string>& labels) {
    std::string text = joined(labels);
    if (text.empty()) text = "\n";  // the dimension's single slot: an empty list
    nc_check(nc_put_var_text(nc, var_id, text.data()), path, "writing the names");
}

std::optional<std::vector<std::string>> read_names(int nc, const std::string& path,
                                                   const std::string& var) {
    int id = -1;
    if (nc_inq_varid(nc, var.c_str(), &id) != NC_NOERR) return std::nullopt;
    nc_type type = NC_NAT;
    int ndims = 0;
    nc_check(nc_inq_var(nc, id, nullptr, &type, &ndims, nullptr, nullptr), path,
             "inquiring variable '" + var + "'");
    if (type != NC_CHAR || ndims != 1) {
        throw Error(ErrorCategory::kIo, path + ": variable '" + var + "' is " + nc_type_name(type) +
                                            " with " + std::to_string(ndims) +
                                            " dimensions; expected 1-D char (names, one a line)");
    }
    int dim = -1;
    size_t length = 0;
    nc_check(nc_inq_vardimid(nc, id, &dim), path, "inquiring variable '" + var + "'");
    nc_check(nc_inq_dimlen(nc, dim, &length), path, "inquiring variable '" + var + "'");
    std::string text(length, '\0');
    if (length > 0) {
        nc_check(nc_get_var_text(nc, id, text.data()), path, "reading variable '" + var + "'");
    }
    std::vector<std::string> labels;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = text.find('\n', pos);
        if (end == std::string::npos) {
            throw Error(ErrorCategory::kIo, path + ": variable '" + var +
                                                "' does not end with a line break; expected "
                                                "names one a line");
        }
        if (end == 0 && text.size() == 1) break;  // the empty list
        labels.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return labels;
}

}  // namespace io

}  // namespace sparsenet

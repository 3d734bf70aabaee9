#include "sparsenet/index_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "sparsenet/error.h"

namespace sparsenet {

std::vector<std::string> read_index(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCategory::kIo, path + ": cannot open index file");
    std::vector<std::string> labels;
    std::vector<bool> present;
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
        if (index >= labels.size()) {
            labels.resize(index + 1);
            present.resize(index + 1, false);
        }
        if (present[index]) {
            throw Error(ErrorCategory::kData,
                        where + "index " + number + " is given to two labels");
        }
        labels[index] = label;
        present[index] = true;
    }
    for (size_t i = 0; i < present.size(); ++i) {
        if (!present[i]) {
            throw Error(ErrorCategory::kData, path + ": index " + std::to_string(i) +
                                                  " has no label; expected indices 0.." +
                                                  std::to_string(present.size() - 1));
        }
    }
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
            throw Error(ErrorCategory::kIo, path + ": write failed (disk full?)");
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(ErrorCategory::kIo, path + ": " + ec.message());
    }
}

}  // namespace sparsenet

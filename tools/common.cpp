#include "common.h"

#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>

#include "sparsenet/error.h"

namespace sparsenet::cli {

int run_command(const std::string& command, const std::function<int()>& body) {
    try {
        return body();
    } catch (const Error& e) {
        std::fprintf(stderr, "sparsenet %s: error: %s\n", command.c_str(), e.what());
        return e.category() == ErrorCategory::kUsage ? 2 : 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "sparsenet %s: error: out of host memory\n", command.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sparsenet %s: internal error: %s\n", command.c_str(), e.what());
        return 3;
    }
}

std::map<std::string, Dataset> load_datasets(const std::vector<std::string>& paths) {
    std::map<std::string, Dataset> all;
    std::map<std::string, std::string> origin;
    std::vector<std::string> done;
    for (const std::string& path : paths) {
        bool seen = false;
        for (const std::string& d : done) {
            std::error_code ec;
            if (d == path || std::filesystem::equivalent(d, path, ec)) seen = true;
        }
        if (seen) continue;
        done.push_back(path);
        for (Dataset& d : read_datasets(path)) {
            auto it = origin.find(d.name);
            if (it != origin.end()) {
                throw Error(ErrorCategory::kData, "dataset '" + d.name + "' is in both " +
                                                      it->second + " and " + path +
                                                      "; dataset names must be unique");
            }
            origin[d.name] = path;
            std::string name = d.name;
            all.emplace(name, std::move(d));
        }
    }
    return all;
}

std::map<std::string, const Dataset*> pointers(const std::map<std::string, Dataset>& datasets) {
    std::map<std::string, const Dataset*> p;
    for (const auto& kv : datasets) p[kv.first] = &kv.second;
    return p;
}

void check_writable(const std::string& path) {
    const std::string probe = path + ".probe." + std::to_string(getpid());
    FILE* f = std::fopen(probe.c_str(), "w");
    if (f == nullptr) {
        throw Error(ErrorCategory::kIo, path + ": cannot create the output file here");
    }
    std::fclose(f);
    std::remove(probe.c_str());
}

void set_threads(int threads) {
    if (threads > 0) omp_set_num_threads(threads);
}

std::vector<std::string> split_list(const std::string& list, const std::string& option) {
    std::vector<std::string> out;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    if (out.empty()) throw Error(ErrorCategory::kUsage, "option " + option + ": no names");
    return out;
}

}  // namespace sparsenet::cli

// A small command-line parser: long options, short options and DSSTNE's single-dash words
// (-alpha, -lambda) side by side, typed values, and errors that name the flag.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sparsenet::cli {

class ArgParser {
  public:
    ArgParser(std::string command, std::string summary);

    // names: e.g. {"-c", "--config"}; the first long name is shown in help.
    void add(std::vector<std::string> names, std::string* target, std::string metavar,
             std::string help, bool required = false);
    void add(std::vector<std::string> names, uint32_t* target, std::string metavar,
             std::string help, bool required = false);
    void add(std::vector<std::string> names, uint64_t* target, std::string metavar,
             std::string help, bool required = false);
    void add(std::vector<std::string> names, int* target, std::string metavar, std::string help);
    void add(std::vector<std::string> names, float* target, std::string metavar, std::string help);
    void add(std::vector<std::string> names, double* target, std::string metavar, std::string help);
    void add_flag(std::vector<std::string> names, bool* target, std::string help);
    void add_list(std::vector<std::string> names, std::vector<std::string>* target,
                  std::string metavar, std::string help, bool required = false);

    // Returns false when --help was asked (help already printed). Throws Error(kUsage).
    bool parse(int argc, char** argv);
    std::string help() const;
    bool given(const std::string& name) const;  // any of the option's names

  private:
    struct Option {
        std::vector<std::string> names;
        std::string metavar;
        std::string help;
        bool required = false;
        bool is_flag = false;
        bool seen = false;
        std::function<void(const std::string& flag, const std::string& value)> set;
    };
    void add_option(Option option);
    Option* find(const std::string& name);

    std::string command_;
    std::string summary_;
    std::vector<Option> options_;
};

}  // namespace sparsenet::cli

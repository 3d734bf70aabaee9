#include "args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "sparsenet/error.h"

namespace sparsenet::cli {
namespace {

[[noreturn]] void bad_value(const std::string& flag, const std::string& value,
                            const std::string& expected) {
    throw Error(ErrorCategory::kUsage, "option " + flag + ": '" + value + "' is not " + expected);
}

uint64_t parse_unsigned(const std::string& flag, const std::string& value, uint64_t max) {
    if (value.empty() || value[0] == '-') bad_value(flag, value, "a non-negative integer");
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        bad_value(flag, value, "a non-negative integer up to " + std::to_string(max));
    }
    return v;
}

double parse_double(const std::string& flag, const std::string& value) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || errno != 0 || *end != '\0') bad_value(flag, value, "a number");
    return v;
}

}  // namespace

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {
    Option help;
    help.names = {"-h", "--help"};
    help.help = "show this help";
    help.is_flag = true;
    help.set = [](const std::string&, const std::string&) {};
    options_.push_back(std::move(help));
}

void ArgParser::add_option(Option option) {
    options_.push_back(std::move(option));
}

void ArgParser::add(std::vector<std::string> names, std::string* target, std::string metavar,
                    std::string help, bool required) {
    add_option({std::move(names), std::move(metavar), std::move(help), required, false, false,
                [target](const std::string&, const std::string& v) { *target = v; }});
}

void ArgParser::add(std::vector<std::string> names, uint32_t* target, std::string metavar,
                    std::string help, bool required) {
    add_option({std::move(names), std::move(metavar), std::move(help), required, false, false,
                [target](const std::string& f, const std::string& v) {
                    *target = static_cast<uint32_t>(
                        parse_unsigned(f, v, std::numeric_limits<uint32_t>::max()));
                }});
}

void ArgParser::add(std::vector<std::string> names, uint64_t* target, std::string metavar,
                    std::string help, bool required) {
    add_option({std::move(names), std::move(metavar), std::move(help), required, false, false,
                [target](const std::string& f, const std::string& v) {
                    *target = parse_unsigned(f, v, std::numeric_limits<uint64_t>::max());
                }});
}

void ArgParser::add(std::vector<std::string> names, int* target, std::string metavar,
                    std::string help) {
    add_option({std::move(names), std::move(metavar), std::move(help), false, false, false,
                [target](const std::string& f, const std::string& v) {
                    *target = static_cast<int>(parse_unsigned(f, v, 4096));
                }});
}

void ArgParser::add(std::vector<std::string> names, float* target, std::string metavar,
                    std::string help) {
    add_option({std::move(names), std::move(metavar), std::move(help), false, false, false,
                [target](const std::string& f, const std::string& v) {
                    *target = static_cast<float>(parse_double(f, v));
                }});
}

void ArgParser::add(std::vector<std::string> names, double* target, std::string metavar,
                    std::string help) {
    add_option(
        {std::move(names), std::move(metavar), std::move(help), false, false, false,
         [target](const std::string& f, const std::string& v) { *target = parse_double(f, v); }});
}

void ArgParser::add_flag(std::vector<std::string> names, bool* target, std::string help) {
    add_option({std::move(names), "", std::move(help), false, true, false,
                [target](const std::string&, const std::string&) { *target = true; }});
}

void ArgParser::add_list(std::vector<std::string> names, std::vector<std::string>* target,
                         std::string metavar, std::string help, bool required) {
    add_option({std::move(names), std::move(metavar), std::move(help), required, false, false,
                [target](const std::string&, const std::string& v) { target->push_back(v); }});
}

ArgParser::Option* ArgParser::find(const std::string& name) {
    for (Option& o : options_) {
        for (const std::string& n : o.names) {
            if (n == name) return &o;
        }
    }
    return nullptr;
}

bool ArgParser::given(const std::string& name) const {
    for (const Option& o : options_) {
        for (const std::string& n : o.names) {
            if (n == name) return o.seen;
        }
    }
    return false;
}

bool ArgParser::parse(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i];
        std::string value;
        bool has_value = false;
        const size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        if (arg == "-h" || arg == "--help") {
            std::fputs(help().c_str(), stdout);
            return false;
        }
        Option* o = find(arg);
        if (o == nullptr) {
            throw Error(
                ErrorCategory::kUsage,
                (arg.empty() || arg[0] != '-' ? "unexpected argument '" : "unknown option '") +
                    arg + "'; see 'sparsenet " + command_ + " --help'");
        }
        if (o->is_flag) {
            if (has_value) throw Error(ErrorCategory::kUsage, "option " + arg + " takes no value");
        } else if (!has_value) {
            if (i + 1 >= argc) {
                throw Error(ErrorCategory::kUsage,
                            "option " + arg + " needs a value (" + o->metavar + ")");
            }
            value = argv[++i];
        }
        o->set(arg, value);
        o->seen = true;
    }
    for (const Option& o : options_) {
        if (o.required && !o.seen) {
            std::string names;
            for (const std::string& n : o.names) names += (names.empty() ? "" : "/") + n;
            throw Error(ErrorCategory::kUsage, "missing required option " + names + " " +
                                                   o.metavar + "; see 'sparsenet " + command_ +
                                                   " --help'");
        }
    }
    return true;
}

std::string ArgParser::help() const {
    std::ostringstream out;
    out << "usage: sparsenet " << command_ << " [options]\n\n" << summary_ << "\n\noptions:\n";
    for (const Option& o : options_) {
        std::string names;
        for (const std::string& n : o.names) names += (names.empty() ? "" : ", ") + n;
        if (!o.metavar.empty()) names += " " + o.metavar;
        out << "  " << names;
        if (names.size() < 30) {
            out << std::string(30 - names.size(), ' ');
        } else {
            out << "\n" << std::string(32, ' ');
        }
        out << o.help << (o.required ? " (required)" : "") << "\n";
    }
    return out.str();
}

}  // namespace sparsenet::cli

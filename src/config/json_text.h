// JSON text helpers shared by the config parser (error messages) and writer (to_json).
#pragma once

#include <string>

namespace sparsenet::config {

// s as a JSON string literal, quotes included, with ", \ and control characters escaped.
std::string json_string(const std::string& s);

}  // namespace sparsenet::config

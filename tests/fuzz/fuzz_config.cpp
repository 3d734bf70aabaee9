// libFuzzer target: the network JSON parser. Every input must parse or throw sparsenet::Error;
// any other exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sparsenet/config.h"
#include "sparsenet/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const sparsenet::NetworkConfig config = sparsenet::NetworkConfig::from_json(text);
        // What parsed must print and parse back (to_json is the canonical form).
        const std::string canonical = config.to_json();
        (void)sparsenet::NetworkConfig::from_json(canonical, "<canonical>");
    } catch (const sparsenet::Error&) {
        // Expected: the document was refused with a message.
    }
    return 0;
}

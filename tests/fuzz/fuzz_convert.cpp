// libFuzzer target: the text converters (src/data/convert.cpp) and the index-file reader
// (src/io/index_file.cpp). The first byte picks the reader and the options (fuzz_convert_case.h);
// the rest is the file. Only sparsenet::Error may come out; anything else, a crash or a
// sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_convert_case.h"
#include "fuzz_util.h"
#include "sparsenet/convert.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/index_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    static const sparsenet_fuzz::ScratchFile file(".txt");
    const std::string& path = file.write(data + 1, size - 1);
    sparsenet_fuzz::ConvertCase c = sparsenet_fuzz::convert_case(data[0]);
    // Numeric ids are the indices themselves, so "0 37138303" is a 37-million-row dataset (by
    // design; docs/reliability.md): numbers of more than 5 digits are left out where ids may be
    // numeric, or every run would stop at the first such allocation.
    if (!c.index_file && c.options.ids != sparsenet::IdMode::kFirstSeen) {
        size_t digits = 0;
        for (size_t i = 1; i < size; ++i) {
            digits = (data[i] >= '0' && data[i] <= '9') ? digits + 1 : 0;
            if (digits > 5) return 0;
        }
    }
    try {
        if (c.index_file) {
            const std::vector<std::string> labels = sparsenet::read_index(path);
            const sparsenet::LabelIndex index = sparsenet::LabelIndex::read(path);
            if (index.size() != labels.size()) __builtin_trap();
            return 0;
        }
        sparsenet::ConvertStats stats;
        const sparsenet::Dataset d =
            sparsenet::convert_text({path}, "data", c.options, c.samples, c.features, &stats);
        d.validate(path);
        // Row r is sample r of the index, column c feature c (convert.h).
        if (d.rows != c.samples.size() || d.cols != c.features.size()) __builtin_trap();
    } catch (const sparsenet::Error&) {
        // Expected: the text was refused with a message.
    }
    return 0;
}

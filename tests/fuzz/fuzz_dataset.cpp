// libFuzzer target: the netCDF dataset reader (src/io/netcdf_dataset.cpp). The bytes are written
// to a scratch file (the reader opens files by path) and read every way the library reads
// datasets: list_datasets, read_dataset_shape, read_datasets and a column band of read_columns.
// Only sparsenet::Error may come out; anything else, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const sparsenet_fuzz::ScratchFile file(".nc");
    const std::string& path = file.write(data, size);
    try {
        const std::vector<std::string> names = sparsenet::list_datasets(path);
        const sparsenet::DatasetShape shape = sparsenet::read_dataset_shape(path);
        const std::vector<sparsenet::Dataset> all = sparsenet::read_datasets(path);
        for (const sparsenet::Dataset& d : all) d.validate(path);
        // A band in the middle of the first dataset (clamped by the reader when out of range).
        const uint32_t first = shape.cols / 3, last = first + shape.cols / 2;
        const sparsenet::Dataset band =
            sparsenet::Dataset::read_columns(path, names.empty() ? "" : names.front(), first, last);
        band.validate(path);
    } catch (const sparsenet::Error&) {
        // Expected: the file was refused with a message.
    }
    return 0;
}

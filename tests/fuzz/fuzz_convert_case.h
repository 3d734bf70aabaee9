// How fuzz_convert reads its input's first byte; shared with tests/io/fuzz_regression_test.cpp so
// that kept inputs replay exactly. The rest of the input is the file.
//   bits 0-2  0 auto, 1 dsstne, 2 csv, 3 tsv, 4 dat, 5 user-items (convert_text);
//             6 and 7: the file is an index file (read_index, LabelIndex::read)
//   bit 3     analog (keep values)
//   bits 4-5  ids: 0 default, 1 first-seen, 2 numeric, 3 default
//   bit 6     min_rating 3.0
//   bit 7     frozen features index ("0".."3"): unknown features dropped (bit 3 clear) or errors
//             (bit 3 set); the samples index ("0".."3") is frozen too when bit 6 is set
#pragma once

#include <cstdint>

#include "sparsenet/convert.h"

namespace sparsenet_fuzz {

struct ConvertCase {
    bool index_file = false;
    sparsenet::ConvertOptions options;
    sparsenet::LabelIndex samples, features;  // the indexes convert_text starts from
};

inline ConvertCase convert_case(uint8_t control) {
    using sparsenet::IdMode;
    using sparsenet::TextFormat;
    static const TextFormat formats[] = {TextFormat::kAuto, TextFormat::kDsstne,
                                         TextFormat::kCsv,  TextFormat::kTsv,
                                         TextFormat::kDat,  TextFormat::kUserItems};
    static const IdMode ids[] = {IdMode::kDefault, IdMode::kFirstSeen, IdMode::kNumeric,
                                 IdMode::kDefault};
    ConvertCase c;
    const unsigned mode = control & 7u;
    c.index_file = mode >= 6;
    if (c.index_file) return c;
    c.options.format = formats[mode];
    c.options.analog = (control & 8u) != 0;
    c.options.ids = ids[(control >> 4) & 3u];
    if (control & 64u) c.options.min_rating = 3.0;
    if (control & 128u) {
        c.features = sparsenet::LabelIndex::numeric(4);
        c.options.grow_features = false;
        c.options.unknown = c.options.analog ? sparsenet::UnknownFeatures::kError
                                             : sparsenet::UnknownFeatures::kDrop;
        if (control & 64u) {
            c.samples = sparsenet::LabelIndex::numeric(4);
            c.options.grow_samples = false;
        }
    }
    return c;
}

}  // namespace sparsenet_fuzz

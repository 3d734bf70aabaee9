// Writing predict's top-K lists: DSSTNE's recs text ('name<TAB>item,score:item,score:...') and
// an .npz of arrays for pipelines (numpy.load reads it directly).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sparsenet/predictor.h"

namespace sparsenet::cli {

// One printf floating-point conversion (as predict's -p takes it: "%.6g", "%4.3f", "%10.4e"),
// parsed once. append() writes exactly the text snprintf(format, double(score)) writes: through
// std::to_chars (specified as printf's text for a given precision) for a conversion f, e or g
// with a width and a precision and no flags, and through snprintf for anything else. snprintf
// was most of the time of writing 138,493 rows of 100 scores (the ML-20M shape).
class ScoreFormat {
  public:
    explicit ScoreFormat(const std::string& format);
    void append(std::string& out, float score) const;
    // The fast path's text at p (room for kFastRoom + width() bytes); returns its end.
    char* write(char* p, float score) const;
    static constexpr int kFastRoom = 128;
    int width() const { return width_; }
    const std::string& format() const { return format_; }
    bool fast() const { return fast_; }  // to_chars path (for the tests)

  private:
    std::chars_format how() const {
        return conversion_ == 'f'   ? std::chars_format::fixed
               : conversion_ == 'e' ? std::chars_format::scientific
                                    : std::chars_format::general;
    }
    std::string format_;
    bool fast_ = false;
    char conversion_ = 'g';
    int width_ = 0;
    int precision_ = 6;
};

struct RecsText {
    const TopK* top = nullptr;
    const std::vector<std::string>* sample_names = nullptr;   // by row; empty: row numbers
    const std::vector<std::string>* feature_names = nullptr;  // by column; empty: column numbers
    const ScoreFormat* format = nullptr;
    bool dsstne = false;  // DSSTNE's -r form: every entry ends with ':' ("item,score:")
};

// One row's line, '\n' included, appended to `out`.
void append_recs_line(const RecsText& recs, uint64_t row, std::string& out);

// Every row in order to `out`: blocks of 16,384 rows, each cut into chunks of 256 rows that the
// OpenMP threads format in parallel, each chunk into its own buffer, and each block written with
// one writev of those buffers in order: the bytes one thread writes, for any thread count.
// False on a write error (errno set); `out` is flushed first, and nothing is left in its
// buffer.
bool write_recs_text(const RecsText& recs, std::FILE* out);

// One array of an .npz file: `descr` is numpy's dtype string ("<f4", "<u4", "<i8", "<U12"),
// `data` its bytes in C order (little-endian).
struct NpyArray {
    std::string name;  // the key numpy.load gives it (the zip entry is name + ".npy")
    std::string descr;
    std::vector<uint64_t> shape;
    const void* data = nullptr;
    uint64_t bytes = 0;
};

// The .npy header (magic, version 1.0, the dict padded to a multiple of 64 bytes) of `a`.
std::string npy_header(const NpyArray& a);

// An uncompressed ("stored") zip of one .npy per array, as numpy.savez writes; ZIP64 records
// where an entry or the archive passes 4 GiB (or always, with force_zip64: for the tests).
// False on a write error (errno set).
bool write_npz(std::FILE* out, const std::vector<NpyArray>& arrays, bool force_zip64 = false);

// The names as numpy's fixed-width unicode array ("<U<width>": UTF-32LE code points, each name
// padded with zeros): `descr` set, the bytes returned (the NpyArray's data points at them).
// A name that is not valid UTF-8 is Error(kData) naming `what` and the entry.
std::vector<char32_t> utf32_names(const std::vector<std::string>& names, const std::string& what,
                                  uint64_t count, std::string* descr);

}  // namespace sparsenet::cli

// predict's writers (tools/recs_output.cpp): the recs text byte for byte as the snprintf
// formatter that wrote it before (scores of every kind, names, DSSTNE's form, blocks of rows),
// and the .npz archive's structure (the zip records, CRC-32, ZIP64, the .npy headers). numpy
// reading the archive back is tests/python/test_predict_output.py.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "recs_output.h"
#include "support/test_support.h"

namespace sparsenet::cli {
namespace {

// The formatter predict used before to_chars (tools/predict.cpp at 300fb67): one snprintf per
// score into a 64-byte buffer, labels through std::to_string.
std::string old_label(const std::vector<std::string>& names, uint64_t i) {
    return i < names.size() ? names[i] : std::to_string(i);
}

std::string old_line(const TopK& top, uint64_t r, const std::vector<std::string>& samples,
                     const std::vector<std::string>& features, const std::string& fmt, bool text) {
    std::string line = old_label(samples, r);
    line += '\t';
    for (uint32_t i = 0; i < top.k; ++i) {
        const uint32_t item = top.indices[r * top.k + i];
        if (item == std::numeric_limits<uint32_t>::max()) break;
        char score[64];
        std::snprintf(score, sizeof score, fmt.c_str(), top.scores[r * top.k + i]);
        if (i > 0 && !text) line += ':';
        line += old_label(features, item);
        line += ',';
        line += score;
        if (text) line += ':';
    }
    line += '\n';
    return line;
}

// Floats of every kind: random bit patterns (denormals, NaNs and infinities among them), the
// edges, integers, tiny and huge values, and values near a rounding boundary of 6 digits.
std::vector<float> many_floats(size_t n) {
    std::mt19937 rng(7);
    std::vector<float> v = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            0.5f,
                            100000.0f,
                            999999.5f,
                            1e6f,
                            123456789.0f,
                            0.1f,
                            0.0001f,
                            0.00001f,
                            9.9999995e-5f,
                            0.9999995f,
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::lowest(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN()};
    std::uniform_int_distribution<uint32_t> bits;
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::uniform_int_distribution<int> integer(-2000000, 2000000);
    std::uniform_int_distribution<uint32_t> denormal(1, 0x007FFFFF);
    while (v.size() < n) {
        uint32_t b = bits(rng);
        float f;
        std::memcpy(&f, &b, 4);
        v.push_back(f);
        v.push_back(unit(rng));  // sigmoid scores: predict's usual case
        v.push_back(float(integer(rng)));
        b = denormal(rng) | (bits(rng) & 0x80000000u);
        std::memcpy(&f, &b, 4);
        v.push_back(f);
    }
    return v;
}

std::string printf_text(const std::string& fmt, float f) {
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt.c_str(), double(f));
    return buf;
}

// How many of `floats` ScoreFormat(fmt) writes otherwise than printf does (the first 5 reported).
size_t printf_mismatches(const std::string& fmt, const std::vector<float>& floats) {
    const ScoreFormat format(fmt);
    size_t differ = 0;
    std::string out;
    for (const float f : floats) {
        out.clear();
        format.append(out, f);
        const std::string want = printf_text(fmt, f);
        if (out != want && ++differ <= 5) {
            ADD_FAILURE() << "score " << printf_text("%.9g", f) << ": '" << out << "', printf '"
                          << want << "'";
        }
    }
    return differ;
}

TEST(ScoreFormat, SameTextAsPrintfForEveryKindOfFloat) {
    const std::vector<float> floats = many_floats(200000);
    // The defaults (.6g for --input, 4.3f for -r), and other forms -p takes.
    for (const std::string fmt :
         {"%.6g", "%4.3f",  "%g",     "%.9g",  "%.17g", "%.0g",  "%.g",  "%.1g",   "%10.4e",
          "%e",   "%.0e",   "%f",     "%.0f",  "%.12f", "%8.2f", "%12g", "%20.3e", "%+.3f",
          "%#g",  "%-8.3f", "%08.3f", "% .4g", "%G",    "%.3E",  "%a"}) {
        SCOPED_TRACE(fmt);
        EXPECT_EQ(printf_mismatches(fmt, floats), 0u);
    }
    // to_chars takes the conversions without flags; the rest stay with snprintf.
    EXPECT_TRUE(ScoreFormat("%.6g").fast());
    EXPECT_TRUE(ScoreFormat("%4.3f").fast());
    EXPECT_TRUE(ScoreFormat("%10.4e").fast());
    EXPECT_FALSE(ScoreFormat("%+.3f").fast());
    EXPECT_FALSE(ScoreFormat("%G").fast());
}

// The integer path of "%.<P>g" (P <= 9, 1e-10 <= |x| < 1e10) against printf over a stride of
// every float bit pattern (both signs, a million values, every exponent), and over the
// neighbours of each power of ten and of each value halfway between two P-digit numbers.
TEST(ScoreFormat, IntegerPathOfGIsPrintfOverAllExponents) {
    std::vector<float> floats;
    for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 4099) {
        const uint32_t bits = uint32_t(b);
        float f;
        std::memcpy(&f, &bits, 4);
        floats.push_back(f);
    }
    for (int d = -11; d <= 10; ++d) {
        for (const double mantissa : {1.0, 9.9999995, 9.999995, 1.0000005, 1.5, 2.5, 1.234565}) {
            float f = float(mantissa * std::pow(10.0, d));
            for (int i = 0; i < 6; ++i) f = std::nextafter(f, 0.0f);
            for (int i = 0; i < 12; ++i, f = std::nextafter(f, 1e30f)) {
                floats.push_back(f);
                floats.push_back(-f);
            }
        }
    }
    for (const std::string fmt : {"%.6g", "%g", "%.1g", "%.3g", "%.9g", "%.0g"}) {
        SCOPED_TRACE(fmt);
        EXPECT_EQ(printf_mismatches(fmt, floats), 0u);
    }
}

TopK random_top(uint64_t rows, uint32_t k, uint32_t items, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<uint32_t> item(0, items - 1);
    std::uniform_int_distribution<uint32_t> used(0, k);
    std::uniform_real_distribution<float> score(-3.0f, 1.0f);
    TopK top;
    top.rows = rows;
    top.k = k;
    top.scores.assign(rows * k, -std::numeric_limits<float>::infinity());
    top.indices.assign(rows * k, std::numeric_limits<uint32_t>::max());
    for (uint64_t r = 0; r < rows; ++r) {
        const uint32_t n = r % 7 == 0 ? used(rng) : k;  // some rows with fewer than k items
        float s = 1.0f;
        for (uint32_t i = 0; i < n; ++i) {
            s = std::min(s, score(rng));
            top.scores[r * k + i] = s;
            top.indices[r * k + i] = item(rng);
        }
    }
    return top;
}

TEST(RecsText, LinesAreTheOldFormattersByteForByte) {
    const TopK top = random_top(500, 12, 3000, 1);
    const std::vector<std::string> none;
    const std::vector<std::string> samples = {"alice", "bob", "ünïcode", ""};  // fewer than rows
    std::vector<std::string> item_names;
    for (int i = 0; i < 2000; ++i) item_names.push_back("item-" + std::to_string(i * 3));
    const std::vector<std::string>& features = item_names;  // fewer than the items too
    for (const std::string fmt : {"%.6g", "%4.3f", "%+.2e"}) {
        const ScoreFormat format(fmt);
        for (const bool dsstne : {false, true}) {
            for (const std::vector<std::string>* s : {&none, &samples}) {
                for (const std::vector<std::string>* f : {&none, &features}) {
                    const RecsText recs{&top, s, f, &format, dsstne};
                    for (uint64_t r = 0; r < top.rows; ++r) {
                        std::string line;
                        append_recs_line(recs, r, line);
                        ASSERT_EQ(line, old_line(top, r, *s, *f, fmt, dsstne))
                            << fmt << " dsstne " << dsstne << " row " << r;
                    }
                }
            }
        }
    }
}

TEST(RecsText, FileIsTheOldFormattersLinesInOrder) {
    // More rows than a block (16,384), on as many threads as OpenMP gives (at least 2 here, so
    // the per-thread buffers are joined in order).
    const int threads = omp_get_max_threads();
    omp_set_num_threads(std::max(threads, 3));
    const TopK top = random_top(40000, 5, 100000, 2);
    const std::vector<std::string> none;
    const ScoreFormat format("%.6g");
    testing::TempDir dir;
    const std::string path = dir.file("recs.txt");
    std::FILE* out = std::fopen(path.c_str(), "w");
    ASSERT_NE(out, nullptr);
    std::fputs("", out);
    ASSERT_TRUE(write_recs_text(RecsText{&top, &none, &none, &format, false}, out));
    ASSERT_EQ(std::fclose(out), 0);
    omp_set_num_threads(threads);
    std::string want;
    for (uint64_t r = 0; r < top.rows; ++r) want += old_line(top, r, none, none, "%.6g", false);
    const std::string got = testing::read_file(path);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);
}

// The parallel writer (blocks of 16,384 rows, each block's rows split between the OpenMP
// threads, one buffer per thread, joined with writev) against the same rows formatted on one
// thread in order, byte for byte: for 1, 2, 3, 5 and 8 threads (more threads than this machine's
// 2 cores, so that every buffer boundary falls somewhere new), the two default score formats,
// one to_chars path with a width, one snprintf path (a flag), DSSTNE's -r form and names
// (sample and item labels, fewer than the rows and items, so that numbers follow names).
TEST(RecsText, ParallelWriterIsTheSingleThreadedTextByteForByte) {
    const int threads = omp_get_max_threads();
    const TopK top = random_top(16384 + 2500, 7, 5000, 4);  // a whole block and a partial one
    const std::vector<std::string> none;
    std::vector<std::string> samples, items;
    for (int i = 0; i < 9000; ++i) samples.push_back("user-" + std::to_string(i * 7));
    for (int i = 0; i < 3000; ++i) items.push_back("item" + std::to_string(i) + "-x");
    testing::TempDir dir;
    const std::string path = dir.file("recs.txt");
    int cases = 0;
    for (const std::string fmt : {"%.6g", "%4.3f", "%10.4e", "%+.3f"}) {
        const ScoreFormat format(fmt);
        for (const bool dsstne : {false, true}) {
            for (const bool named : {false, true}) {
                const RecsText recs{&top, named ? &samples : &none, named ? &items : &none,
                                    &format, dsstne};
                std::string want;  // one thread, row after row
                for (uint64_t r = 0; r < top.rows; ++r) append_recs_line(recs, r, want);
                // ... which is also the old snprintf formatter's text.
                if (fmt == "%.6g" || fmt == "%+.3f") {
                    std::string old;
                    for (uint64_t r = 0; r < top.rows; ++r) {
                        old += old_line(top, r, named ? samples : none, named ? items : none, fmt,
                                        dsstne);
                    }
                    ASSERT_TRUE(old == want) << fmt << " dsstne " << dsstne << " named " << named;
                }
                for (const int t : {1, 2, 3, 5, 8}) {
                    omp_set_num_threads(t);
                    std::FILE* out = std::fopen(path.c_str(), "w");
                    ASSERT_NE(out, nullptr);
                    std::fputs("head\n", out);  // buffered in the FILE: flushed first
                    const bool ok = write_recs_text(recs, out);
                    omp_set_num_threads(threads);
                    ASSERT_TRUE(ok);
                    ASSERT_EQ(std::fclose(out), 0);
                    const std::string got = testing::read_file(path);
                    ASSERT_EQ(got.size(), want.size() + 5)
                        << fmt << " dsstne " << dsstne << " named " << named << " threads " << t;
                    ASSERT_TRUE(got == "head\n" + want)
                        << fmt << " dsstne " << dsstne << " named " << named << " threads " << t;
                    ++cases;
                }
            }
        }
    }
    EXPECT_EQ(cases, 80);
}

TEST(RecsText, WriteErrorIsReported) {
    const TopK top = random_top(10, 3, 10, 3);
    const std::vector<std::string> none;
    const ScoreFormat format("%.6g");
    std::FILE* full = std::fopen("/dev/full", "w");
    if (full == nullptr) GTEST_SKIP() << "no /dev/full";
    EXPECT_FALSE(write_recs_text(RecsText{&top, &none, &none, &format, false}, full));
    EXPECT_EQ(errno, ENOSPC);
    std::fclose(full);
}

uint64_t le(const std::string& s, size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[at + size_t(i)]);
    return v;
}

uint32_t bitwise_crc32(const char* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
        c ^= uint8_t(p[i]);
        for (int b = 0; b < 8; ++b) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

struct Entry {
    std::string name, data;
};

// A minimal reader of a stored zip, following the end records to the central directory and
// each entry's local header, checking every size, offset and CRC on the way.
std::vector<Entry> read_zip(const std::string& z, bool expect_zip64) {
    std::vector<Entry> entries;
    const size_t eocd = z.size() - 22;
    EXPECT_EQ(le(z, eocd, 4), 0x06054b50u);
    uint64_t count = le(z, eocd + 10, 2), cd_size = le(z, eocd + 12, 4),
             cd_offset = le(z, eocd + 16, 4);
    if (expect_zip64) {
        EXPECT_EQ(count, 0xFFFFu);
        const size_t locator = eocd - 20;
        EXPECT_EQ(le(z, locator, 4), 0x07064b50u);
        const size_t record = size_t(le(z, locator + 8, 8));
        EXPECT_EQ(record, locator - 56);
        EXPECT_EQ(le(z, record, 4), 0x06064b50u);
        count = le(z, record + 32, 8);
        cd_size = le(z, record + 40, 8);
        cd_offset = le(z, record + 48, 8);
        EXPECT_EQ(cd_offset + cd_size, record);
    } else {
        EXPECT_EQ(cd_offset + cd_size, eocd);
    }
    size_t at = size_t(cd_offset);
    for (uint64_t e = 0; e < count; ++e) {
        EXPECT_EQ(le(z, at, 4), 0x02014b50u);
        EXPECT_EQ(le(z, at + 10, 2), 0u);  // stored
        const uint32_t crc = uint32_t(le(z, at + 16, 4));
        uint64_t size = le(z, at + 24, 4), offset = le(z, at + 42, 4);
        const size_t name_len = size_t(le(z, at + 28, 2)), extra_len = size_t(le(z, at + 30, 2));
        const std::string name = z.substr(at + 46, name_len);
        if (expect_zip64) {
            const size_t x = at + 46 + name_len;
            EXPECT_EQ(le(z, x, 2), 1u);
            EXPECT_EQ(le(z, x + 2, 2), 24u);
            EXPECT_EQ(size, 0xFFFFFFFFu);
            size = le(z, x + 4, 8);
            EXPECT_EQ(le(z, x + 12, 8), size);
            offset = le(z, x + 20, 8);
        }
        at += 46 + name_len + extra_len + size_t(le(z, at + 32, 2));
        const size_t local = size_t(offset);
        EXPECT_EQ(le(z, local, 4), 0x04034b50u);
        EXPECT_EQ(le(z, local + 14, 4), crc);
        EXPECT_EQ(z.substr(local + 30, le(z, local + 26, 2)), name);
        const size_t data =
            local + 30 + size_t(le(z, local + 26, 2)) + size_t(le(z, local + 28, 2));
        const std::string bytes = z.substr(data, size_t(size));
        EXPECT_EQ(bitwise_crc32(bytes.data(), bytes.size()), crc) << name;
        entries.push_back({name, bytes});
    }
    return entries;
}

TEST(Npz, NpyHeaderIsNumpys) {
    const std::string h = npy_header(NpyArray{"scores", "<f4", {138493, 100}, nullptr, 0});
    EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(le(h, 8, 2), h.size() - 10);
    EXPECT_EQ(h.back(), '\n');
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (138493, 100), }";
    EXPECT_EQ(h.substr(10, dict.size()), dict);
    EXPECT_EQ(h.find_first_not_of(' ', 10 + dict.size()), h.size() - 1);
    const std::string one = npy_header(NpyArray{"users", "<i8", {7}, nullptr, 0});
    EXPECT_NE(one.find("'shape': (7,), }"), std::string::npos) << one;
}

TEST(Npz, ArchiveHoldsEachArrayWithItsCrc) {
    std::vector<float> scores(3000);
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = float(i) * 0.5f;
    std::vector<uint32_t> items(3000, 4000000000u);
    testing::TempDir dir;
    for (const bool zip64 : {false, true}) {
        const std::string path = dir.file(zip64 ? "a64.npz" : "a.npz");
        std::FILE* out = std::fopen(path.c_str(), "w");
        ASSERT_NE(out, nullptr);
        ASSERT_TRUE(write_npz(out,
                              {{"scores", "<f4", {1000, 3}, scores.data(), scores.size() * 4},
                               {"items", "<u4", {1000, 3}, items.data(), items.size() * 4}},
                              zip64));
        ASSERT_EQ(std::fclose(out), 0);
        const std::vector<Entry> entries = read_zip(testing::read_file(path), zip64);
        ASSERT_EQ(entries.size(), 2u);
        EXPECT_EQ(entries[0].name, "scores.npy");
        EXPECT_EQ(entries[1].name, "items.npy");
        const std::string h = npy_header(NpyArray{"scores", "<f4", {1000, 3}, nullptr, 0});
        ASSERT_EQ(entries[0].data.size(), h.size() + 12000);
        EXPECT_EQ(entries[0].data.substr(0, h.size()), h);
        EXPECT_EQ(std::memcmp(entries[0].data.data() + h.size(), scores.data(), 12000), 0);
        EXPECT_EQ(std::memcmp(entries[1].data.data() + h.size(), items.data(), 12000), 0);
    }
}

TEST(Npz, NamesBecomeAFixedWidthUnicodeArray) {
    std::string descr;
    const std::vector<char32_t> a = utf32_names({"ab", "ü€", "x", "unused"}, "names", 3, &descr);
    EXPECT_EQ(descr, "<U2");
    EXPECT_EQ(a, (std::vector<char32_t>{U'a', U'b', 0xFC, 0x20AC, U'x', 0}));
    const std::string e = testing::expect_error(
        [] {
            std::string d;
            utf32_names({"ok", "bad\xff"}, "user names", 2, &d);
        },
        ErrorCategory::kData);
    EXPECT_TRUE(testing::contains(e, "user names: name 1")) << e;
    EXPECT_TRUE(testing::contains(e, "UTF-8")) << e;
}

}  // namespace
}  // namespace sparsenet::cli

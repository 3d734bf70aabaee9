#include "recs_output.h"

#include <omp.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

#include "sparsenet/error.h"

namespace sparsenet::cli {
namespace {

// Precision above this goes through snprintf: to_chars then needs at most 39 integer digits, the
// point and 40 decimals of a float in 'f', well inside the 128-byte buffer below.
constexpr int kMaxFastPrecision = 40;

void append_number(std::string& out, uint64_t v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    out.append(buf, size_t(end - buf));
}

void append_label(std::string& out, const std::vector<std::string>* names, uint64_t i) {
    if (names != nullptr && i < names->size()) {
        out += (*names)[i];
    } else {
        append_number(out, i);
    }
}

// Every iovec written, in order, retrying short writes and EINTR. False on an error (errno).
bool write_all(int fd, std::vector<iovec> iov) {
    size_t i = 0;
    while (i < iov.size()) {
        if (iov[i].iov_len == 0) {
            ++i;
            continue;
        }
        const int n = int(std::min<size_t>(iov.size() - i, IOV_MAX));
        const ssize_t w = ::writev(fd, &iov[i], n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        size_t left = size_t(w);
        while (left > 0 && i < iov.size()) {
            if (left >= iov[i].iov_len) {
                left -= iov[i].iov_len;
                ++i;
            } else {
                iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
                iov[i].iov_len -= left;
                left = 0;
            }
        }
    }
    return true;
}

// CRC-32 (zip's: reflected 0xEDB88320), eight bytes a step ("slicing by 8"): about 1 GB/s, so
// the 55 MB of scores of the ML-20M shape's top-100 cost some 50 ms. Written here rather than
// taken from zlib, which the CLI does not otherwise link.
struct Crc32 {
    uint32_t table[8][256];
    Crc32() {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int b = 0; b < 8; ++b) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; ++i) {
            for (int t = 1; t < 8; ++t) {
                table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
            }
        }
    }
    uint32_t update(uint32_t crc, const unsigned char* p, uint64_t n) const {
        crc = ~crc;
        while (n >= 8) {
            uint32_t lo, hi;
            std::memcpy(&lo, p, 4);
            std::memcpy(&hi, p + 4, 4);
            lo ^= crc;
            crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
                  table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
                  table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
            p += 8;
            n -= 8;
        }
        while (n-- > 0) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        return ~crc;
    }
};

constexpr uint64_t kPow10[20] = {1ull,
                                 10ull,
                                 100ull,
                                 1000ull,
                                 10000ull,
                                 100000ull,
                                 1000000ull,
                                 10000000ull,
                                 100000000ull,
                                 1000000000ull,
                                 10000000000ull,
                                 100000000000ull,
                                 1000000000000ull,
                                 10000000000000ull,
                                 100000000000000ull,
                                 1000000000000000ull,
                                 10000000000000000ull,
                                 100000000000000000ull,
                                 1000000000000000000ull,
                                 10000000000000000000ull};

// 10^-12 .. 10^12 (index k + 12), for the first guess of a float's decimal exponent.
constexpr double kPow10Double[25] = {1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4,
                                     1e-3,  1e-2,  1e-1,  1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                                     1e6,   1e7,   1e8,   1e9,  1e10, 1e11, 1e12};

// printf's "%.<P>g" of a float x with 1e-10 <= |x| < 1e10 and 1 <= P <= 9, exactly: the float's
// binary value m * 2^e scaled by 10^s in integers (128 bits at most), rounded half to even as
// printf rounds the exact value, then laid out as %g does (fixed for exponents -4 .. P-1, else
// d.ddde+XX; trailing zeros dropped). Formatting 138,493 rows of 100 random scores to /dev/null
// on one thread took 1.05 s this way, 1.89 s through to_chars and 5.7 s through snprintf (the
// shared 2-core development VM).
char* write_g(char* p, float x, int precision) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    if (bits >> 31) *p++ = '-';
    const uint64_t m = (bits & 0x7FFFFFu) | 0x800000u;  // normal: 1e-10 is far above FLT_MIN
    const int e = int((bits >> 23) & 0xFF) - 150;
    const int P = precision;
    // The decimal exponent d of |x| (10^d <= |x| < 10^(d+1)): estimated from the binary one,
    // then corrected by the integer part q of |x| * 10^(P-1-d), which has P digits for the
    // right d.
    int d = ((e + 23) * 1233) >> 12;  // floor(log10(2^(e+23))): d or d - 1
    if (std::fabs(double(x)) >= kPow10Double[d + 1 + 12]) ++d;  // nearly always d now
    uint64_t q = 0;
    bool up = false;
    for (int tries = 0; tries < 4; ++tries) {
        const int s = P - 1 - d;
        if (s >= 0 && s <= 11 && e < 0 && e > -64) {  // the usual case, in 64 bits
            const uint64_t num = m * kPow10[s];       // < 2^24 * 10^11 < 2^61
            const int sh = -e;
            q = num >> sh;
            const uint64_t rem = num & ((uint64_t(1) << sh) - 1);
            const uint64_t half = uint64_t(1) << (sh - 1);
            up = rem > half || (rem == half && (q & 1));
        } else if (s >= 0) {  // |x| * 10^s = m * 10^s * 2^e
            unsigned __int128 num = (unsigned __int128)m * kPow10[s];
            if (e >= 0) {
                num <<= e;
                q = uint64_t(num);
                up = false;
                if (num >> 64) q = ~uint64_t(0);  // far too large: d is raised below
            } else {
                const int sh = -e;
                const unsigned __int128 qq = num >> sh;
                const unsigned __int128 rem = num - (qq << sh);
                const unsigned __int128 half = (unsigned __int128)1 << (sh - 1);
                q = qq >> 64 ? ~uint64_t(0) : uint64_t(qq);
                up = rem > half || (rem == half && (q & 1));
            }
        } else {  // |x| / 10^-s = m * 2^e / 10^-s, |x| < 2^34
            const uint64_t num = e >= 0 ? m << e : m;
            const uint64_t den = e >= 0 ? kPow10[-s] : kPow10[-s] << -e;
            q = num / den;
            const uint64_t rem = num - q * den;
            up = 2 * rem > den || (2 * rem == den && (q & 1));
        }
        if (q >= kPow10[P]) {
            ++d;
        } else if (q < kPow10[P - 1]) {
            --d;
        } else {
            break;
        }
    }
    uint64_t n = q + (up ? 1 : 0);
    if (n == kPow10[P]) {  // rounded up to the next power of ten
        n = kPow10[P - 1];
        ++d;
    }
    char digits[12];
    for (int i = P - 1; i >= 0; --i) {
        digits[i] = char('0' + n % 10);
        n /= 10;
    }
    int used = P;  // trailing zeros dropped, as %g does without '#'
    while (used > 1 && digits[used - 1] == '0') --used;
    if (d >= -4 && d < P) {
        if (d < 0) {
            *p++ = '0';
            *p++ = '.';
            for (int i = 0; i < -d - 1; ++i) *p++ = '0';
            std::memcpy(p, digits, size_t(used));
            return p + used;
        }
        std::memcpy(p, digits, size_t(d + 1));
        p += d + 1;
        if (used > d + 1) {
            *p++ = '.';
            std::memcpy(p, digits + d + 1, size_t(used - d - 1));
            p += used - d - 1;
        }
        return p;
    }
    *p++ = digits[0];
    if (used > 1) {
        *p++ = '.';
        std::memcpy(p, digits + 1, size_t(used - 1));
        p += used - 1;
    }
    *p++ = 'e';
    *p++ = d < 0 ? '-' : '+';
    const int ad = d < 0 ? -d : d;
    *p++ = char('0' + ad / 10);
    *p++ = char('0' + ad % 10);
    return p;
}

void put16(std::string& s, uint16_t v) {
    s += char(v & 0xFF);
    s += char(v >> 8);
}
void put32(std::string& s, uint32_t v) {
    put16(s, uint16_t(v & 0xFFFF));
    put16(s, uint16_t(v >> 16));
}
void put64(std::string& s, uint64_t v) {
    put32(s, uint32_t(v & 0xFFFFFFFFu));
    put32(s, uint32_t(v >> 32));
}

constexpr uint32_t kMax32 = 0xFFFFFFFFu;
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, the earliest DOS date

}  // namespace

ScoreFormat::ScoreFormat(const std::string& format) : format_(format) {
    // The format was checked by predict's score_format: '%', flags, width, '.precision', one
    // conversion. Flags (and "%F", "%E", "%G", "%a") keep snprintf.
    size_t i = 1;
    if (format_.size() < 2 || format_[0] != '%') return;
    if (std::strchr("-+ #0", format_[i]) != nullptr) return;
    int width = 0;
    while (i < format_.size() && std::isdigit(static_cast<unsigned char>(format_[i]))) {
        width = width * 10 + (format_[i++] - '0');
        if (width > 100000) return;
    }
    int precision = 6;
    if (i < format_.size() && format_[i] == '.') {
        precision = 0;
        ++i;
        while (i < format_.size() && std::isdigit(static_cast<unsigned char>(format_[i]))) {
            precision = precision * 10 + (format_[i++] - '0');
            if (precision > kMaxFastPrecision) return;
        }
    }
    if (i + 1 != format_.size() || std::strchr("feg", format_[i]) == nullptr) return;
    conversion_ = format_[i];
    width_ = width;
    precision_ = precision;
    fast_ = true;
}

void ScoreFormat::append(std::string& out, float score) const {
    if (!fast_) {
        char buf[128];
        const int n = std::snprintf(buf, sizeof buf, format_.c_str(), double(score));
        if (n < int(sizeof buf)) {
            out.append(buf, size_t(std::max(n, 0)));
        } else {
            std::string big(size_t(n) + 1, '\0');
            std::snprintf(big.data(), big.size(), format_.c_str(), double(score));
            out.append(big.data(), size_t(n));
        }
        return;
    }
    if (width_ <= 1024) {
        char buf[kFastRoom + 1024];
        out.append(buf, size_t(write(buf, score) - buf));
    } else {
        const size_t at = out.size();
        out.resize(at + size_t(kFastRoom + width_));
        out.resize(size_t(write(out.data() + at, score) - out.data()));
    }
}

char* ScoreFormat::write(char* p, float score) const {
    // The float overload: the same text as for double(score), the value printf is given (the
    // test compares them over every kind of float), 15 % faster here (85 against 101 ns).
    const float a = std::fabs(score);
    char* end = conversion_ == 'g' && precision_ <= 9 && a >= 1e-10f && a < 1e10f
                    ? write_g(p, score, std::max(precision_, 1))
                    : std::to_chars(p, p + kFastRoom, score, how(), precision_).ptr;
    const int n = int(end - p);
    if (n >= width_) return end;
    std::memmove(p + (width_ - n), p, size_t(n));
    std::memset(p, ' ', size_t(width_ - n));
    return p + width_;
}

void append_recs_line(const RecsText& recs, uint64_t row, std::string& out) {
    const TopK& top = *recs.top;
    append_label(out, recs.sample_names, row);
    out += '\t';
    const uint32_t* items = top.indices.data() + row * top.k;
    const float* scores = top.scores.data() + row * top.k;
    const ScoreFormat& format = *recs.format;
    // Entries of column numbers and a to_chars format are put together in a buffer and
    // appended once, rather than in five appends.
    const bool numeric = (recs.feature_names == nullptr || recs.feature_names->empty()) &&
                         format.fast() && format.width() < 1024;
    char entry[32 + ScoreFormat::kFastRoom + 1024];
    for (uint32_t i = 0; i < top.k; ++i) {
        if (items[i] == std::numeric_limits<uint32_t>::max()) break;
        if (numeric) {
            char* p = entry;
            if (i > 0 && !recs.dsstne) *p++ = ':';
            p = std::to_chars(p, p + 16, items[i]).ptr;
            *p++ = ',';
            p = format.write(p, scores[i]);
            if (recs.dsstne) *p++ = ':';
            out.append(entry, size_t(p - entry));
            continue;
        }
        if (i > 0 && !recs.dsstne) out += ':';
        append_label(out, recs.feature_names, items[i]);
        out += ',';
        format.append(out, scores[i]);
        if (recs.dsstne) out += ':';  // DSSTNE ends every entry with ':'
    }
    out += '\n';
}

bool write_recs_text(const RecsText& recs, std::FILE* out) {
    if (std::fflush(out) != 0) return false;
    const int fd = fileno(out);
    const uint64_t rows = recs.top->rows;
    // 16,384 rows of 100 entries are some 20 MB of text: large enough that the writes cost
    // little, small enough that the buffers stay in memory once. Each block is cut into chunks
    // of 256 rows, each formatted into its own buffer by whichever thread takes it next
    // (dynamic scheduling), and the chunks' buffers are written in order with one writev. With
    // one contiguous run of rows per thread instead (static), a block takes as long as its
    // slowest thread, and on the 2-core development VM shared with other jobs 2 threads
    // formatted the ML-20M shape's 138,493 rows of 100 entries in 0.66-0.69 s against
    // 0.41-0.47 s for one. Chunks bound that wait to one chunk, but on that VM, saturated
    // (load 10), 2 threads were still no faster than one, with either split (medians 1.05 and
    // 1.16 s against 0.85 and 0.89 s: benchmarks/results/2026-11-28-vm-recs-writer-threads.json):
    // the speed-up needs idle cores.
    constexpr uint64_t kBlock = 16384, kChunk = 256;
    constexpr size_t kChunks = size_t(kBlock / kChunk);
    std::vector<std::string> buffers(kChunks);
    std::vector<iovec> iov;
    const int threads = std::max(1, omp_get_max_threads());
    for (uint64_t r0 = 0; r0 < rows; r0 += kBlock) {
        const uint64_t n = std::min(kBlock, rows - r0);
        const int64_t chunks = int64_t((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && chunks > 1)
        for (int64_t c = 0; c < chunks; ++c) {
            std::string& b = buffers[size_t(c)];
            b.clear();
            const uint64_t first = r0 + uint64_t(c) * kChunk;
            const uint64_t last = std::min(r0 + n, first + kChunk);
            for (uint64_t r = first; r < last; ++r) append_recs_line(recs, r, b);
        }
        iov.clear();
        for (int64_t c = 0; c < chunks; ++c) {
            std::string& b = buffers[size_t(c)];
            iov.push_back({b.data(), b.size()});
        }
        if (!write_all(fd, iov)) return false;
    }
    return true;
}

std::string npy_header(const NpyArray& a) {
    std::string shape = "(";
    for (size_t i = 0; i < a.shape.size(); ++i) {
        shape += std::to_string(a.shape[i]);
        shape += a.shape.size() == 1 ? "," : (i + 1 < a.shape.size() ? ", " : "");
    }
    shape += ")";
    std::string dict =
        "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    // numpy pads the dict with spaces and a '\n' so that the data starts on a 64-byte boundary.
    const size_t unpadded = 10 + dict.size() + 1;
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict += '\n';
    std::string h("\x93NUMPY\x01\x00", 8);
    put16(h, uint16_t(dict.size()));
    return h + dict;
}

bool write_npz(std::FILE* out, const std::vector<NpyArray>& arrays, bool force_zip64) {
    if (std::fflush(out) != 0) return false;
    const int fd = fileno(out);
    static const Crc32 crc32;
    std::string central;
    uint64_t offset = 0;
    for (const NpyArray& a : arrays) {
        const std::string header = npy_header(a);
        const std::string name = a.name + ".npy";
        const uint64_t size = header.size() + a.bytes;
        uint32_t crc =
            crc32.update(0, reinterpret_cast<const unsigned char*>(header.data()), header.size());
        crc = crc32.update(crc, static_cast<const unsigned char*>(a.data), a.bytes);
        const bool big_size = force_zip64 || size >= kMax32;
        const bool big_offset = force_zip64 || offset >= kMax32;

        std::string local;
        put32(local, 0x04034b50);
        put16(local, big_size ? 45 : 20);  // version needed: 4.5 for ZIP64
        put16(local, 0);                   // flags
        put16(local, 0);                   // stored
        put16(local, 0);                   // time
        put16(local, kDosDate);
        put32(local, crc);
        put32(local, big_size ? kMax32 : uint32_t(size));
        put32(local, big_size ? kMax32 : uint32_t(size));
        put16(local, uint16_t(name.size()));
        put16(local, big_size ? 20 : 0);  // extra field
        local += name;
        if (big_size) {
            put16(local, 0x0001);  // ZIP64 extended information
            put16(local, 16);
            put64(local, size);
            put64(local, size);
        }

        std::string extra;
        if (big_size || big_offset) {
            put16(extra, 0x0001);
            put16(extra, uint16_t((big_size ? 16 : 0) + (big_offset ? 8 : 0)));
            if (big_size) {
                put64(extra, size);
                put64(extra, size);
            }
            if (big_offset) put64(extra, offset);
        }
        put32(central, 0x02014b50);
        put16(central, (3 << 8) | 45);  // made by: Unix, 4.5
        put16(central, big_size || big_offset ? 45 : 20);
        put16(central, 0);
        put16(central, 0);
        put16(central, 0);
        put16(central, kDosDate);
        put32(central, crc);
        put32(central, big_size ? kMax32 : uint32_t(size));
        put32(central, big_size ? kMax32 : uint32_t(size));
        put16(central, uint16_t(name.size()));
        put16(central, uint16_t(extra.size()));
        put16(central, 0);               // comment
        put16(central, 0);               // disk
        put16(central, 0);               // internal attributes
        put32(central, 0100644u << 16);  // external: a regular file, rw-r--r--
        put32(central, big_offset ? kMax32 : uint32_t(offset));
        central += name;
        central += extra;

        std::vector<iovec> iov{{local.data(), local.size()},
                               {const_cast<char*>(header.data()), header.size()},
                               {const_cast<void*>(a.data), size_t(a.bytes)}};
        if (!write_all(fd, iov)) return false;
        offset += local.size() + size;
    }
    const uint64_t entries = arrays.size();
    const bool zip64_end = force_zip64 || offset >= kMax32 || central.size() >= kMax32;
    std::string end;
    if (zip64_end) {
        const uint64_t record = offset + central.size();
        put32(end, 0x06064b50);  // ZIP64 end of central directory record
        put64(end, 44);
        put16(end, (3 << 8) | 45);
        put16(end, 45);
        put32(end, 0);
        put32(end, 0);
        put64(end, entries);
        put64(end, entries);
        put64(end, central.size());
        put64(end, offset);
        put32(end, 0x07064b50);  // its locator
        put32(end, 0);
        put64(end, record);
        put32(end, 1);
    }
    put32(end, 0x06054b50);
    put16(end, 0);
    put16(end, 0);
    put16(end, zip64_end ? 0xFFFF : uint16_t(entries));
    put16(end, zip64_end ? 0xFFFF : uint16_t(entries));
    put32(end, zip64_end ? kMax32 : uint32_t(central.size()));
    put32(end, zip64_end ? kMax32 : uint32_t(offset));
    put16(end, 0);
    return write_all(fd, {{central.data(), central.size()}, {end.data(), end.size()}});
}

std::vector<char32_t> utf32_names(const std::vector<std::string>& names, const std::string& what,
                                  uint64_t count, std::string* descr) {
    count = std::min<uint64_t>(count, names.size());
    std::vector<std::u32string> decoded(static_cast<size_t>(count));
    size_t width = 1;
    for (uint64_t n = 0; n < count; ++n) {
        const std::string& s = names[size_t(n)];
        std::u32string& d = decoded[size_t(n)];
        for (size_t i = 0; i < s.size();) {
            const unsigned char c = static_cast<unsigned char>(s[i]);
            const int len = c < 0x80         ? 1
                            : (c >> 5) == 6  ? 2
                            : (c >> 4) == 14 ? 3
                            : (c >> 3) == 30 ? 4
                                             : 0;
            char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
            bool ok = len > 0 && i + size_t(len) <= s.size();
            for (int k = 1; ok && k < len; ++k) {
                const unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
                ok = (cc >> 6) == 2;
                cp = (cp << 6) | (cc & 0x3F);
            }
            if (!ok || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
                throw Error(ErrorCategory::kData, what + ": name " + std::to_string(n) + " ('" + s +
                                                      "') is not valid UTF-8");
            }
            d += cp;
            i += size_t(len);
        }
        width = std::max(width, d.size());
    }
    std::vector<char32_t> out(size_t(count) * width, U'\0');
    for (uint64_t n = 0; n < count; ++n) {
        std::copy(decoded[size_t(n)].begin(), decoded[size_t(n)].end(),
                  out.begin() + std::ptrdiff_t(n * width));
    }
    *descr = "<U" + std::to_string(width);
    return out;
}

}  // namespace sparsenet::cli

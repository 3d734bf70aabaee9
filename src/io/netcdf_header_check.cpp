#include "io/netcdf_header_check.h"

#include <fcntl.h>
#include <netcdf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "io/netcdf_util.h"
#include "sparsenet/error.h"

// The format: "The NetCDF Classic Format Specification" (netCDF-C's
// docs/file_format_specifications.md) and its CDF-5 extension. Every integer is big-endian;
// counts and sizes are 32 bits in CDF-1/CDF-2 and 64 in CDF-5, begin offsets 32 bits in CDF-1 and
// 64 in CDF-2/CDF-5. Beyond the grammar it checks what netCDF-C 4.9.0's header reader takes on
// trust (counts, name lengths, types, ranks and dimension ids, which it allocates by or indexes
// with), the checks netCDF-C makes itself after reading a header (NC_computeshapes,
// NC_check_vlens, NC_check_voffs), and rules netCDF-C's writer always keeps (names of 1 to
// NC_MAX_NAME bytes without NUL, no duplicate names, vsize from the shape, the data within the
// file), so that no file netCDF-C writes is refused.

namespace sparsenet::io {
namespace {

constexpr uint32_t kAbsent = 0x00;
constexpr uint32_t kDimensionTag = 0x0A;
constexpr uint32_t kVariableTag = 0x0B;
constexpr uint32_t kAttributeTag = 0x0C;
constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr uint64_t kReadChunk = 64 * 1024;

// Closes a file descriptor when the scope ends.
class Fd {
  public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }

  private:
    int fd_;
};

// Bytes of one value of `type` in a file of `version` (1, 2 or 5); 0 when the version has no such
// type (NC_STRING and user-defined types are netCDF-4 only, the unsigned and 64-bit ones CDF-5).
uint64_t type_size(uint32_t type, int version) {
    switch (type) {
        case NC_BYTE:
        case NC_CHAR:
            return 1;
        case NC_SHORT:
            return 2;
        case NC_INT:
        case NC_FLOAT:
            return 4;
        case NC_DOUBLE:
            return 8;
        default:
            break;
    }
    if (version != 5) return 0;
    switch (type) {
        case NC_UBYTE:
            return 1;
        case NC_USHORT:
            return 2;
        case NC_UINT:
            return 4;
        case NC_INT64:
        case NC_UINT64:
            return 8;
        default:
            return 0;
    }
}

// A name from the file in single quotes, bytes outside printable ASCII as \xNN (a corrupt header
// holds anything).
std::string quoted(const std::string& name) {
    std::string out = "'";
    for (const char c : name) {
        const auto b = static_cast<unsigned char>(c);
        if (b < 0x20 || b >= 0x7F || c == '\\') {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02X", b);
            out += hex;
        } else {
            out += c;
        }
    }
    return out + "'";
}

// n rounded up to a multiple of 4; n is at most 2^63 + 3 here, so it cannot overflow.
uint64_t round_up4(uint64_t n) {
    return (n + 3) / 4 * 4;
}

struct Dim {
    std::string name;
    uint64_t length = 0;  // 0: the unlimited (record) dimension
};

struct Var {
    std::string name;
    bool record = false;     // its first dimension is the unlimited one
    uint64_t data_size = 0;  // bytes of its data (per record for a record variable), unpadded
    uint64_t len = 0;        // data_size rounded up to 4: netCDF-C's NC_var.len
    uint64_t begin = 0;
    uint64_t begin_at = 0;  // where the begin field is in the file
};

// Parses one classic-format header from an open file, failing with the offset of the offending
// field.
class HeaderCheck {
  public:
    HeaderCheck(const std::string& path, int fd, uint64_t file_size, int version)
        : path_(path), fd_(fd), file_size_(file_size), version_(version) {}

    void run() {
        pos_ = 4;  // after the magic
        numrecs_at_ = pos_;
        numrecs_ = read_count("numrecs");
        streaming_ = numrecs_ ==
                     (version_ == 5 ? std::numeric_limits<uint64_t>::max() : uint64_t{0xFFFFFFFF});
        if (version_ == 5 && !streaming_ && numrecs_ > kInt64Max) {
            fail(numrecs_at_, "numrecs " + std::to_string(numrecs_) + " is negative");
        }
        read_dims();
        read_atts("global attribute");
        read_vars();
        check_layout();
    }

  private:
    // ---- reading ----

    [[noreturn]] void fail(uint64_t at, const std::string& what) const {
        throw Error(ErrorCategory::kIo, path_ + ": corrupt netCDF header: " + what + " (byte " +
                                            std::to_string(at) + ")");
    }

    uint64_t remaining() const { return file_size_ - pos_; }

    // Bytes of a count or size field (NON_NEG) and of a begin field (OFFSET).
    unsigned count_bytes() const { return version_ == 5 ? 8 : 4; }
    unsigned offset_bytes() const { return version_ == 1 ? 4 : 8; }

    // The next n bytes (n <= kReadChunk), read into the buffer when they are not there yet.
    const unsigned char* peek(uint64_t n, const std::string& what) {
        if (n > remaining()) {
            fail(pos_, what + " runs past the end of the file (" + std::to_string(remaining()) +
                           " bytes left, " + std::to_string(n) + " needed)");
        }
        if (pos_ < buffer_start_ || pos_ + n > buffer_start_ + buffer_.size()) {
            const uint64_t want = std::min<uint64_t>(std::max(n, kReadChunk), remaining());
            buffer_.resize(want);
            buffer_start_ = pos_;
            uint64_t got = 0;
            while (got < want) {
                const ssize_t r =
                    pread(fd_, buffer_.data() + got, want - got, static_cast<off_t>(pos_ + got));
                if (r < 0 && errno == EINTR) continue;
                if (r < 0) {
                    throw Error(ErrorCategory::kIo,
                                path_ + ": reading the netCDF header: " + std::strerror(errno));
                }
                if (r == 0) break;  // the file shrank since fstat
                got += static_cast<uint64_t>(r);
            }
            buffer_.resize(got);
            if (got < n) fail(pos_, what + " runs past the end of the file (it shrank)");
        }
        return buffer_.data() + (pos_ - buffer_start_);
    }

    uint64_t read_uint(unsigned bytes, const std::string& what) {
        const unsigned char* p = peek(bytes, what);
        uint64_t v = 0;
        for (unsigned i = 0; i < bytes; ++i) v = v << 8 | p[i];
        pos_ += bytes;
        return v;
    }

    uint32_t read_tag(const std::string& what) { return static_cast<uint32_t>(read_uint(4, what)); }
    uint64_t read_count(const std::string& what) { return read_uint(count_bytes(), what); }

    void skip(uint64_t n, const std::string& what) {
        if (n > remaining()) {
            fail(pos_, what + " runs past the end of the file (" + std::to_string(remaining()) +
                           " bytes left, " + std::to_string(n) + " needed)");
        }
        pos_ += n;
    }

    // name = nelems namestring padding: 1 to NC_MAX_NAME bytes, no NUL (netCDF-C never writes
    // anything else; callers read names into NC_MAX_NAME + 1 buffers and as C strings).
    std::string read_name(const std::string& what) {
        const uint64_t at = pos_;
        const uint64_t length = read_count(what + ": the name length");
        if (length == 0) fail(at, what + " has an empty name");
        if (length > remaining()) {
            fail(at, what + ": name length " + std::to_string(length) +
                         " runs past the end of the file (" + std::to_string(remaining()) +
                         " bytes left)");
        }
        if (length > NC_MAX_NAME) {
            fail(at, what + ": name length " + std::to_string(length) + " is over NC_MAX_NAME (" +
                         std::to_string(NC_MAX_NAME) + ")");
        }
        const unsigned char* p = peek(round_up4(length), what + ": the name and its padding");
        std::string name(reinterpret_cast<const char*>(p), length);
        const size_t nul = name.find('\0');
        if (nul != std::string::npos) {
            fail(pos_ + nul, what + ": the name " + quoted(name) + " contains a NUL byte");
        }
        pos_ += round_up4(length);
        return name;
    }

    // A list's tag and element count: ABSENT (zero tag and count, or netCDF-C's tolerated tag
    // with count 0) or `tag` and a count that the rest of the file can hold at `min_size` bytes
    // per element (netCDF-C allocates the count before reading any element).
    uint64_t read_list_head(uint32_t tag, const char* tag_name, uint64_t min_size,
                            const std::string& what) {
        const uint64_t tag_at = pos_;
        const uint32_t found = read_tag(what + ": the list tag");
        const uint64_t count_at = pos_;
        const uint64_t count = read_count(what + ": the count");
        if (count == 0) {
            if (found != kAbsent && found != tag) {
                fail(tag_at, what + ": tag " + std::to_string(found) + "; expected ABSENT (0) or " +
                                 tag_name + " (" + std::to_string(tag) + ")");
            }
            return 0;
        }
        if (found != tag) {
            fail(tag_at, what + ": tag " + std::to_string(found) + " with " +
                             std::to_string(count) + " elements; expected " + tag_name + " (" +
                             std::to_string(tag) + ")");
        }
        if (count > remaining() / min_size) {
            fail(count_at, what + ": count " + std::to_string(count) +
                               " is more than the rest of the file (" +
                               std::to_string(remaining()) + " bytes) can hold");
        }
        if (count > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
            fail(count_at, what + ": count " + std::to_string(count) +
                               " is more than netCDF-C can number (ids are int)");
        }
        return count;
    }

    // ---- the header ----

    void read_dims() {
        // name length, a name of at least one byte padded to 4, the length
        const uint64_t min_size = 2 * count_bytes() + 4;
        const uint64_t n = read_list_head(kDimensionTag, "NC_DIMENSION", min_size, "dim_list");
        std::set<std::string> names;
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t at = pos_;
            Dim dim;
            dim.name = read_name("dimension #" + std::to_string(i));
            const std::string label = "dimension " + quoted(dim.name);
            if (!names.insert(dim.name).second) {
                fail(at, label + ": a second dimension of that name");
            }
            const uint64_t length_at = pos_;
            dim.length = read_count(label + ": the length");
            if (version_ == 5 && dim.length > kInt64Max) {
                fail(length_at, label + ": length " + std::to_string(dim.length) + " is negative");
            }
            if (dim.length == 0) {
                if (unlimited_ >= 0) {
                    fail(length_at, label + " is a second unlimited (length 0) dimension; " +
                                        quoted(dims_[unlimited_].name) + " is one already");
                }
                unlimited_ = static_cast<int64_t>(i);
            }
            dims_.push_back(dim);
        }
    }

    // An attribute list: global attributes or a variable's. The values are not read; netCDF-C
    // copies them as they are.
    void read_atts(const std::string& owner) {
        // name length, a name of at least one byte padded to 4, the type, the value count
        const uint64_t min_size = 2 * count_bytes() + 8;
        const uint64_t n =
            read_list_head(kAttributeTag, "NC_ATTRIBUTE", min_size, owner + " list (att_list)");
        std::set<std::string> names;
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t at = pos_;
            const std::string name = read_name(owner + " #" + std::to_string(i));
            const std::string label = owner + " " + quoted(name);
            if (!names.insert(name).second) fail(at, label + ": a second attribute of that name");
            const uint64_t type_at = pos_;
            const uint32_t type = read_tag(label + ": the type");
            const uint64_t size = type_size(type, version_);
            if (size == 0) fail(type_at, label + ": " + bad_type(type));
            const uint64_t nelems_at = pos_;
            const uint64_t nelems = read_count(label + ": the value count");
            if (nelems > remaining() / size) {
                fail(nelems_at, label + ": " + std::to_string(nelems) + " values of " +
                                    std::to_string(size) + " bytes run past the end of the file (" +
                                    std::to_string(remaining()) + " bytes left)");
            }
            skip(round_up4(nelems * size), label + ": the values and their padding");
        }
    }

    std::string bad_type(uint32_t type) const {
        if (type_size(type, 5) != 0) {
            return "type " + nc_type_name(int(type)) + " (" + std::to_string(type) +
                   ") exists only in CDF-5 files; this is CDF-" + std::to_string(version_);
        }
        return "type " + std::to_string(type) + " is not a classic-format netCDF type";
    }

    void read_vars() {
        // name length, a name of at least one byte padded to 4, the dimension count, an empty
        // attribute list (tag and count), the type, vsize, begin
        const uint64_t min_size = 4 * count_bytes() + 12 + offset_bytes();
        const uint64_t n = read_list_head(kVariableTag, "NC_VARIABLE", min_size, "var_list");
        std::set<std::string> names;
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t at = pos_;
            Var var;
            var.name = read_name("variable #" + std::to_string(i));
            const std::string label = "variable " + quoted(var.name);
            if (!names.insert(var.name).second) {
                fail(at, label + ": a second variable of that name");
            }

            const uint64_t ndims_at = pos_;
            const uint64_t ndims = read_count(label + ": the dimension count");
            if (ndims > NC_MAX_VAR_DIMS) {
                fail(ndims_at, label + ": " + std::to_string(ndims) +
                                   " dimensions; netCDF allows at most NC_MAX_VAR_DIMS (" +
                                   std::to_string(NC_MAX_VAR_DIMS) + ")");
            }
            uint64_t elements = 1;  // per record for a record variable
            bool overflow = false;
            for (uint64_t d = 0; d < ndims; ++d) {
                const uint64_t id_at = pos_;
                const uint64_t raw = read_uint(count_bytes(), label + ": a dimension id");
                // A signed INT (INT64 in CDF-5); negative ones are out of range too.
                if (raw >= dims_.size()) {
                    const int64_t id =
                        version_ == 5 ? static_cast<int64_t>(raw) : static_cast<int32_t>(raw);
                    fail(id_at, label + ": dimension id " + std::to_string(id) +
                                    " is out of range (the file has " +
                                    std::to_string(dims_.size()) + " dimensions)");
                }
                const Dim& dim = dims_[raw];
                if (dim.length == 0) {
                    if (d != 0) {
                        fail(id_at, label + ": the unlimited dimension " + quoted(dim.name) +
                                        " is its dimension #" + std::to_string(d) +
                                        "; it may only be the first");
                    }
                    var.record = true;
                } else if (__builtin_mul_overflow(elements, dim.length, &elements)) {
                    overflow = true;
                }
            }

            read_atts("attribute of " + label);

            const uint64_t type_at = pos_;
            const uint32_t type = read_tag(label + ": the type");
            const uint64_t size = type_size(type, version_);
            if (size == 0) fail(type_at, label + ": " + bad_type(type));
            if (overflow || __builtin_mul_overflow(elements, size, &var.data_size) ||
                var.data_size > kInt64Max - 3) {
                fail(type_at, label + ": its size (the product of its dimensions times " +
                                  std::to_string(size) + " bytes) is more than 2^63 bytes");
            }
            var.len = round_up4(var.data_size);

            const uint64_t vsize_at = pos_;
            const uint64_t vsize = read_count(label + ": vsize");
            if (!vsize_matches(vsize, var)) {
                fail(vsize_at, label + ": vsize " + std::to_string(vsize) + " does not match " +
                                   std::to_string(var.len) + " bytes" +
                                   (var.record ? " per record" : "") + " (its shape and type)");
            }

            var.begin_at = pos_;
            var.begin = read_uint(offset_bytes(), label + ": begin");
            if (version_ == 1 ? var.begin > 0x7FFFFFFF : var.begin > kInt64Max) {
                fail(var.begin_at, label + ": begin " + std::to_string(var.begin) +
                                       " is negative as a signed " + (version_ == 1 ? "32" : "64") +
                                       "-bit offset");
            }
            vars_.push_back(var);
        }
    }

    // The spec's vsize: the data size rounded up to 4 (also taken unrounded); in CDF-1/2, 2^32 - 1
    // (or the size's low 32 bits, as old writers stored it) when the size does not fit in 32 bits.
    // netCDF-C recomputes it from the shape and ignores it.
    bool vsize_matches(uint64_t vsize, const Var& var) const {
        if (vsize == var.len || vsize == var.data_size) return true;
        if (version_ != 5 && var.len > 0xFFFFFFFCu) {
            return vsize == 0xFFFFFFFFu || vsize == (var.len & 0xFFFFFFFFu) ||
                   vsize == (var.data_size & 0xFFFFFFFFu);
        }
        return false;
    }

    // Where the data lies: the fixed-size variables after the header, in header order and not
    // overlapping, then the record variables likewise (netCDF-C's NC_computeshapes and
    // NC_check_voffs); netCDF-C's size limits of CDF-1/2 (NC_check_vlens); and all the data,
    // numrecs records of the record variables, within the file.
    void check_layout() {
        check_sizes();
        const uint64_t header_end = pos_;
        uint64_t prev_end = header_end;
        const Var* prev = nullptr;
        size_t records = 0;
        for (int pass = 0; pass < 2; ++pass) {
            const bool record = pass == 1;
            for (const Var& var : vars_) {
                if (var.record != record) continue;
                if (var.begin < prev_end) {
                    fail(var.begin_at, "variable " + quoted(var.name) + " begins at byte " +
                                           std::to_string(var.begin) + ", before the end of " +
                                           (prev == nullptr ? std::string("the header")
                                                            : "variable " + quoted(prev->name)) +
                                           " (byte " + std::to_string(prev_end) + ")");
                }
                prev_end = var.begin + var.len;  // both below 2^63
                prev = &var;
                if (record) {
                    ++records;
                } else if (var.data_size > file_size_ - std::min(var.begin, file_size_)) {
                    fail(var.begin_at, "the data of variable " + quoted(var.name) + " (" +
                                           std::to_string(var.data_size) + " bytes at byte " +
                                           std::to_string(var.begin) +
                                           ") runs past the end of the file (" +
                                           std::to_string(file_size_) + " bytes)");
                }
            }
        }
        if (records == 0 || numrecs_ == 0) return;

        // The record size: the padded sizes of the record variables, unpadded when there is only
        // one (netCDF-C's NC_computeshapes).
        uint64_t recsize = 0;
        for (const Var& var : vars_) {
            if (var.record &&
                __builtin_add_overflow(recsize, records == 1 ? var.data_size : var.len, &recsize)) {
                fail(numrecs_at_, "the record variables' sizes add up to more than 2^64 bytes");
            }
        }
        for (const Var& var : vars_) {
            if (!var.record) continue;
            uint64_t last_start = 0, end = 0;
            if (__builtin_mul_overflow(numrecs_ - 1, recsize, &last_start) ||
                __builtin_add_overflow(last_start, var.begin, &last_start) ||
                __builtin_add_overflow(last_start, var.data_size, &end) || end > file_size_) {
                const std::string count = streaming_
                                              ? "numrecs is STREAMING, which netCDF-C takes as " +
                                                    std::to_string(numrecs_) + " records"
                                              : "numrecs is " + std::to_string(numrecs_);
                fail(numrecs_at_, count + ", but the last record of variable " + quoted(var.name) +
                                      " (" + std::to_string(recsize) +
                                      " bytes per record from byte " + std::to_string(var.begin) +
                                      ") would end past the end of the file (" +
                                      std::to_string(file_size_) + " bytes)");
            }
        }
    }

    // netCDF-C's NC_check_vlens: in CDF-1 a variable (one record of a record variable) may hold
    // at most 2^31 - 4 bytes, in CDF-2 2^32 - 4, except the last fixed-size variable when there
    // are no record variables, and the last record variable.
    void check_sizes() const {
        if (version_ == 5) return;  // the 2^63 limit is checked per variable
        const uint64_t max = version_ == 1 ? 0x7FFFFFFFu - 3 : 0xFFFFFFFFu - 3;
        bool any_record = false;
        for (const Var& var : vars_) any_record = any_record || var.record;
        for (int pass = 0; pass < 2; ++pass) {
            const bool record = pass == 1;
            const Var* last = nullptr;
            for (const Var& var : vars_) {
                if (var.record == record) last = &var;
            }
            for (const Var& var : vars_) {
                if (var.record != record || var.data_size <= max) continue;
                if (&var != last || (!record && any_record)) {
                    fail(var.begin_at,
                         "variable " + quoted(var.name) + ": " + std::to_string(var.data_size) +
                             " bytes" + (record ? " per record" : "") + " is over CDF-" +
                             std::to_string(version_) + "'s limit of " + std::to_string(max) +
                             " for all but the last " +
                             (record ? "record variable"
                                     : "fixed-size variable of a file without record variables"));
                }
            }
        }
    }

    const std::string& path_;
    const int fd_;
    const uint64_t file_size_;
    const int version_;
    uint64_t pos_ = 0;
    std::vector<unsigned char> buffer_;
    uint64_t buffer_start_ = 0;

    uint64_t numrecs_ = 0;
    uint64_t numrecs_at_ = 0;
    bool streaming_ = false;
    std::vector<Dim> dims_;
    int64_t unlimited_ = -1;
    std::vector<Var> vars_;
};

}  // namespace

void check_netcdf_header(const std::string& path) {
    Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return;  // nc_open says why
    struct stat st;
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 4) return;
    unsigned char magic[4];
    ssize_t got;
    do {
        got = pread(fd.get(), magic, sizeof magic, 0);
    } while (got < 0 && errno == EINTR);
    if (got != static_cast<ssize_t>(sizeof magic) || std::memcmp(magic, "CDF", 3) != 0) return;
    if (magic[3] != 1 && magic[3] != 2 && magic[3] != 5) return;  // nc_open: not a netCDF file
    HeaderCheck(path, fd.get(), static_cast<uint64_t>(st.st_size), magic[3]).run();
}

}  // namespace sparsenet::io

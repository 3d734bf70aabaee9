// The CPU backend's host buffers (src/backend/cpu/host_memory.h): 64-byte aligned, and from
// kHugePageMin bytes 2 MiB aligned and advised to transparent huge pages, which the kernel then
// gives them where its mode allows.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/host_memory.h"
#include "backend/out_of_memory.h"

namespace sparsenet {
namespace {

using cpu::host_allocate;
using cpu::host_allocation_size;
using cpu::kHugePage;
using cpu::kHugePageMin;

// The kernel's transparent huge page mode: "always", "madvise", "never", or "" without THP.
std::string thp_mode() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!std::getline(f, line)) return "";
    const size_t open = line.find('['), close = line.find(']');
    return open == std::string::npos || close == std::string::npos
               ? ""
               : line.substr(open + 1, close - open - 1);
}

// KiB of huge pages backing the mapping that holds p (/proc/self/smaps), -1 if not found.
long anon_huge_kib_at(const void* p) {
    std::ifstream f("/proc/self/smaps");
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    std::string line;
    bool inside = false;
    while (std::getline(f, line)) {
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = lo <= at && at < hi;
            continue;
        }
        if (inside && line.rfind("AnonHugePages:", 0) == 0)
            return std::strtol(line.c_str() + std::strlen("AnonHugePages:"), nullptr, 10);
    }
    return -1;
}

TEST(HostMemory, SmallBuffersAreCacheLineAlignedAndNotRoundedToPages) {
    for (size_t bytes : {size_t(0), size_t(1), size_t(4096), kHugePageMin - 1}) {
        bool huge = true;
        void* p = host_allocate(bytes, &huge);
        ASSERT_NE(p, nullptr) << bytes;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
        EXPECT_FALSE(huge) << bytes;
        EXPECT_EQ(host_allocation_size(bytes), bytes == 0 ? 64 : (bytes + 63) / 64 * 64) << bytes;
        std::free(p);
    }
}

TEST(HostMemory, LargeBuffersAreHugePageAlignedAndAdvised) {
    // 27,278 x 1,024 floats: dsstne-bench's output weights, 112 MB.
    for (size_t bytes : {kHugePageMin, kHugePageMin + 1, size_t(27278) * 1024 * 4}) {
        EXPECT_EQ(host_allocation_size(bytes), (bytes + kHugePage - 1) / kHugePage * kHugePage);
        bool huge = false;
        void* p = host_allocate(bytes, &huge);
        ASSERT_NE(p, nullptr) << bytes;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePage, 0u) << bytes;
        // madvise(MADV_HUGEPAGE) is accepted wherever the kernel has THP, whatever its mode.
        if (!thp_mode().empty()) {
            EXPECT_TRUE(huge) << bytes;
        }
        std::free(p);
    }
}

TEST(HostMemory, TheKernelBacksAnAdvisedBufferWithHugePages) {
    const std::string mode = thp_mode();
    if (mode != "madvise" && mode != "always")
        GTEST_SKIP() << "transparent huge pages are '" << mode << "' in this kernel";
    const size_t bytes = size_t(16) << 20;
    bool huge = false;
    char* p = static_cast<char*>(host_allocate(bytes, &huge));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(huge);
    std::memset(p, 1, bytes);  // the first touch is when the kernel picks the page size
    const long kib = anon_huge_kib_at(p);
    // Huge pages can be refused when physical memory is too fragmented to compact: at least one
    // of the eight 2 MiB pages is asked for, which a machine running these tests has.
    EXPECT_GE(kib, 2048) << "AnonHugePages of the buffer's mapping (KiB), THP mode " << mode;
    std::free(p);
}

TEST(HostMemory, TheCpuBackendAllocatesThisWay) {
    CpuBackend backend(1);
    void* small = backend.allocate(1000, "small");
    void* large = backend.allocate(kHugePageMin, "large");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % kHugePage, 0u);
    EXPECT_GE(backend.held_bytes(), kHugePageMin + 1000);
    backend.deallocate(small);
    backend.deallocate(large);
    EXPECT_THROW(backend.allocate(std::numeric_limits<size_t>::max(), "overflowing"), Error);
}

// A host allocation that fails inside the library (a std::vector of datasets, of a model file's
// chunk) becomes the named out-of-memory error the backend's own allocations give.
TEST(HostMemoryGuard, BadAllocBecomesANamedOutOfMemoryError) {
    const auto fail = [] { return ::operator new(size_t(1) << 62); };  // no machine has 4 EiB
    const auto check = [&](bool limited) {
        try {
            host_memory_guard("creating a network", fail);
            FAIL() << "expected Error";
        } catch (const Error& e) {
            EXPECT_EQ(e.category(), ErrorCategory::kDevice);
            const std::string m = e.what();
            EXPECT_NE(m.find("out of host memory while creating a network: a host allocation "
                             "failed (std::bad_alloc)"),
                      std::string::npos)
                << m;
            EXPECT_NE(m.find("a smaller --batch"), std::string::npos) << m;
            EXPECT_NE(m.find("mpirun -np N"), std::string::npos) << m;
            EXPECT_EQ(
                m.find("address space is limited to 8.0 GiB (ulimit -v)") != std::string::npos,
                limited)
                << m;
        }
    };
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
    if (saved.rlim_cur == RLIM_INFINITY) check(false);
    // With an address-space limit the message names it. Only the soft limit moves, and back.
    if (saved.rlim_max == RLIM_INFINITY || saved.rlim_max >= (rlim_t(8) << 30)) {
        rlimit limited = saved;
        limited.rlim_cur = rlim_t(8) << 30;
        ASSERT_EQ(setrlimit(RLIMIT_AS, &limited), 0);
        check(true);
        ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
    }
}

}  // namespace
}  // namespace sparsenet

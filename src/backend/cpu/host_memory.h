#pragma once
// Host buffers as the CPU backend allocates them (CpuBackend::allocate), and the rate programs
// under benchmarks/sgemm/ with them, so that those measure the buffers the engine runs on.
//
// Every buffer is 64-byte aligned (a cache line: oneDNN's AMX matmul ran 256 x 27280 x 1024 in
// 12.7 ms instead of 9.2 on buffers 16 bytes past a line). A buffer of kHugePageMin bytes or
// more is also 2 MiB aligned, its size rounded up to 2 MiB, and advised to transparent huge
// pages (madvise MADV_HUGEPAGE, before any page is touched). Debian 12's kernel runs THP in
// `madvise` mode, where nothing else gets huge pages: the output weights (112 MB at 27,278 items)
// then span 27,000 4 KiB pages, and the sparse input's rows, gathered and updated at random, miss
// the TLB on every row. dsstne-bench bf16, 2 cores of an Intel Xeon with AMX, the same build
// alternated three times: epoch 1.84-1.85 s with the advice from 4 MiB, 1.98-2.18 s without;
// from 1 MiB (the hidden layers' 1 MB matrices too) 1.79-1.89, no better, so 4 MiB. Where the
// kernel's mode is `never` the advice changes nothing; `always` gives huge pages without it.

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>

namespace sparsenet::cpu {

constexpr size_t kHugePage = size_t(2) << 20;
// Below this a buffer stays on 64-byte alignment: rounding up to a 2 MiB page could cost more
// resident memory than a buffer this size saves in TLB misses (at most 50 % here).
constexpr size_t kHugePageMin = size_t(4) << 20;

// The bytes host_allocate(bytes) asks the C library for.
inline size_t host_allocation_size(size_t bytes) {
    const size_t align = bytes >= kHugePageMin ? kHugePage : 64;
    if (bytes == 0) return 64;
    if (bytes > ~size_t(0) - align) return 0;  // overflow: no allocation
    return (bytes + align - 1) / align * align;
}

// A buffer of at least `bytes`, freed with std::free; nullptr when the memory cannot be had.
// huge_pages (may be null) says whether the huge-page advice was given and accepted.
inline void* host_allocate(size_t bytes, bool* huge_pages = nullptr) {
    if (huge_pages != nullptr) *huge_pages = false;
    const size_t size = host_allocation_size(bytes);
    if (size == 0) return nullptr;
    const bool huge = bytes >= kHugePageMin;
    void* p = std::aligned_alloc(huge ? kHugePage : 64, size);
    if (p != nullptr && huge) {
        const bool advised = madvise(p, size, MADV_HUGEPAGE) == 0;
        if (huge_pages != nullptr) *huge_pages = advised;
    }
    return p;
}

}  // namespace sparsenet::cpu

// Launch shapes of the CUDA kernels, as host functions (plain C++17: no CUDA header, nothing from
// src/), so that the launchers in kernels/cuda_*.cu and a CPU test
// (tests/backend/launch_shapes_test.cpp) compute the same grids.
//
// The rule (issue 43): a launch over 256K elements or more gets at least 2 blocks per SM of the
// device (264 on an H100's 132 SMs), or the test names why it cannot. A grid that depends on the
// device takes its SM count as a parameter (Context::sm_count). A grid that decides how a sum is
// rounded (the column reductions' chunks) depends on the shape only, never on the device, so that
// results are the same on every GPU.
//
// Notation in the comments: [rows, cols] row-major matrices; B = batch rows; n = layer width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

// Functions the kernels call too (plain inline in a C++ translation unit).
#if defined(__CUDACC__)
#define SPARSENET_LS_HD __host__ __device__ inline
#else
#define SPARSENET_LS_HD inline
#endif

namespace sparsenet::cuda {

// dim3 without the CUDA headers (cuda_common.cuh converts).
struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

struct LaunchShape {
    Dim3 grid;
    Dim3 block;
    uint64_t blocks() const { return uint64_t(grid.x) * grid.y * grid.z; }
    uint64_t threads_per_block() const { return uint64_t(block.x) * block.y * block.z; }
};

// The rule's thresholds (tested, and cited by docs/gpu.md).
constexpr uint64_t kLargeLaunchElements = uint64_t(256) << 10;  // 262,144 elements
constexpr int kMinBlocksPerSm = 2;

constexpr size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

// ---- element-wise work over [rows, cols] ----
//
// elementwise_shape: one thread per element; blocks of 256 threads, x over columns (32..256
// wide, the least power of two >= cols, so narrow matrices do not leave most threads idle), y
// over rows (256 / x rows per block). grid.x covers the columns exactly, grid.y the rows, capped
// at gridDim.y's 65,535 (the kernels loop over rows: SN_ROWS_LOOP).
// Blocks: about rows * cols / 256 (at least cols / 256 when capped): a launch of 256K elements
// has 1,024 blocks or more. Used by add_matrix, scale_matrix, round_bf16, activation_forward,
// activation_backward(_masked), dropout, activation_dropout, optimizer_dense, optimizer_mapped,
// add_column_vector, scale_columns, divide_rows, clip_rows.
inline LaunchShape elementwise_shape(size_t rows, size_t cols) {
    unsigned bx = 32;
    while (bx < cols && bx < 256) bx <<= 1;
    const unsigned by = 256 / bx;
    size_t gy = ceil_div(rows, by);
    if (gy > 65535) gy = 65535;
    if (gy == 0) gy = 1;
    LaunchShape s;
    s.grid = {unsigned(ceil_div(cols, bx)), unsigned(gy), 1};
    s.block = {bx, by, 1};
    return s;
}

// grid_stride_shape: `items` units of work (elements, rows, columns), items_per_block per block
// before the grid strides, blocks of `threads`, at most blocks_per_sm * sm_count blocks (enough
// to fill the device; more would only add block start-up). At least one block.
// Callers: fill (256 elements per block, 32 per SM), column_finalize (a column per thread, 32 per
// SM), csr_matmul_combine (8 per SM), scatter_rows_add, optimizer_rows, catch_up_* (a row per
// block, 16 per SM), compact_kernel and the sorted path's slot kernels (32 per SM), tile_sum and
// segment_sum (a touched column per block, 8 per SM), top_k's decode and segment offsets.
// With items / items_per_block >= 2 * sm_count the rule holds whenever blocks_per_sm >= 2.
inline LaunchShape grid_stride_shape(size_t items, size_t items_per_block, unsigned threads,
                                     size_t blocks_per_sm, int sm_count) {
    size_t blocks = ceil_div(items, items_per_block > 0 ? items_per_block : 1);
    const size_t cap = blocks_per_sm * size_t(sm_count > 0 ? sm_count : 1);
    if (blocks > cap) blocks = cap;
    if (blocks == 0) blocks = 1;
    LaunchShape s;
    s.grid = {unsigned(blocks), 1, 1};
    s.block = {threads, 1, 1};
    return s;
}

// row_blocks_shape: one block of `threads` per row (grid.x = rows; callers check rows < 2^31).
// A row's work is a chain (a block reduction, a walk of the row's sorted targets or entries), so
// a row is not split: B blocks. Callers: softmax_forward (1,024 threads), output_delta (1,024),
// row_max, exp_rows, row_sum_squares, normalize_rows (256), top_k's select_kernel (512) and
// exclusion_bits (128), csr_matmul's slices at parts = 1 (see csr_matmul_shape).
// The rule holds from B = 2 * sm_count rows (264 on an H100); output_delta at batch 256 is the
// named exception (tests/backend/launch_shapes_test.cpp).
inline LaunchShape row_blocks_shape(size_t rows, unsigned threads) {
    LaunchShape s;
    s.grid = {unsigned(rows > 0 ? rows : 1), 1, 1};
    s.block = {threads, 1, 1};
    return s;
}

// ---- a batch's entries, a row's in parts (csr_weight_grad's column counts, tile_count,
// tile_fill and pair_fill; kernels/cuda_csr_weight_grad.cu) ----
//
// entry_parts_shape: grid (rows, parts), blocks of 128 threads; block (b, p) walks part p of
// batch row b's entries (entry_part_range). Work per entry is order-free (an atomic count, a
// claimed slot, a slot fixed by the entry's position), so a row may be split.
// Why: one block per row made the step wait for the batch's longest row, a chain of dependent
// loads and atomics 128 entries at a time: mark 6.7-29 us, tile_count 8-39, tile_fill 11-60 per
// step in the H100 profile of dsstne-bench (2026-11-28, the spread following the batch), where
// the batch's 37,000 entries are a few microseconds of work. `parts`: the least power of two, up
// to 16, giving rows * parts >= 8 blocks per SM; a part covers at least 32 entries, so short
// rows keep one busy block and the rest exit at once.
constexpr unsigned kEntryThreads = 128;
constexpr int kMaxEntryParts = 16;
inline int entry_parts(size_t rows, int sm_count) {
    const size_t want = 8 * size_t(sm_count > 0 ? sm_count : 1);
    int parts = 1;
    while (parts < kMaxEntryParts && rows * size_t(parts) < want) parts *= 2;
    return parts;
}
inline LaunchShape entry_parts_shape(size_t rows, int parts) {
    LaunchShape s;
    s.grid = {unsigned(rows > 0 ? rows : 1), unsigned(parts > 0 ? parts : 1), 1};
    s.block = {kEntryThreads, 1, 1};
    return s;
}
// Part `part` of `parts` of a row of `length` entries: [*begin, *end) relative to the row's
// first entry; parts of 32-entry multiples (a warp's aligned loads), the last ones may be empty.
SPARSENET_LS_HD void entry_part_range(uint64_t length, unsigned part, unsigned parts,
                                      uint64_t* begin, uint64_t* end) {
    uint64_t per = (length + parts - 1) / parts;
    per = (per + 31) / 32 * 32;
    const uint64_t b = per * part, e = b + per;
    *begin = b < length ? b : length;
    *end = e < length ? e : length;
}

// ---- column reductions (column_sum, activation_backward_column_sum, sparseness_penalty,
// normalize_columns; kernels/cuda_reduce.cu) ----
//
// column_partial_kernel and backward_column_partial_kernel: a block of 32 columns x 8 row lanes
// (256 threads) owns the tile [chunk_rows rows, 32 columns]; lane y sums rows y, y + 8, ... of
// the chunk in increasing order, in double, and the 8 lane sums are added in lane order: one
// partial per (chunk, column). column_finalize_kernel then adds a column's chunk partials in
// chunk order. Warps read 32 adjacent floats of one row: coalesced.
//
// chunk_rows: 64 (the chunking before issue 43), halved down to 8 (one row per lane) while the
// grid has fewer than kColumnMinBlocks blocks, doubled while the chunks exceed gridDim.y's 65,535.
// It depends on [rows, cols] only, never on the device: the rounding of the sums (every partial
// in double, then the float result) is the same on every GPU and every run.
//
// Why: one thread per (column, chunk of 64 rows) gave a 256 x 1,024 matrix (1 MB, dsstne-bench's
// hidden layers) 16 blocks of 256 threads on a 132-SM H100, 68 us per launch, 3 per step
// (/work/shared/gpu-runs/2026-11-28-h100/profile-dsstne-bench.txt). Now: 32 x 16 = 512 blocks,
// two rows per thread.
constexpr unsigned kColumnTileCols = 32;  // block.x: one warp spans 32 adjacent columns
constexpr unsigned kColumnRowLanes = 8;   // block.y: rows of a chunk interleaved over 8 lanes
// 512 blocks: 2 per SM up to a 256-SM device (H100: 132), independent of the device.
constexpr size_t kColumnMinBlocks = 512;
constexpr size_t kColumnChunkRows = 64;
constexpr size_t kColumnMinChunkRows = kColumnRowLanes;

struct ColumnReduceShape {
    LaunchShape launch;     // grid (ceil(cols / 32), chunks), block (32, 8)
    size_t chunk_rows = 0;  // rows per chunk (the last chunk may be shorter)
    size_t chunks = 0;      // ceil(rows / chunk_rows); 0 for rows == 0 (no launch)
};

inline ColumnReduceShape column_reduce_shape(size_t rows, size_t cols) {
    ColumnReduceShape s;
    const size_t col_blocks = ceil_div(cols, kColumnTileCols);
    size_t chunk = kColumnChunkRows;
    while (chunk > kColumnMinChunkRows && col_blocks * ceil_div(rows, chunk) < kColumnMinBlocks)
        chunk >>= 1;
    while (ceil_div(rows, chunk) > 65535) chunk <<= 1;
    s.chunk_rows = chunk;
    s.chunks = ceil_div(rows, chunk);
    s.launch.grid = {unsigned(col_blocks > 0 ? col_blocks : 1),
                     unsigned(s.chunks > 0 ? s.chunks : 1), 1};
    s.launch.block = {kColumnTileCols, kColumnRowLanes, 1};
    return s;
}

// column_finalize_kernel: one thread per column adds the chunk partials in order (grid-striding
// over the columns, 32 blocks per SM at most). Work: chunks * cols partials.
inline LaunchShape column_finalize_shape(size_t cols, int sm_count) {
    return grid_stride_shape(cols, 256, 256, 32, sm_count);
}

// ---- the guard's sums of squares (Backend::sum_squares, kernels/cuda_reduce.cu) ----
//
// sum_squares_chunks_kernel: one block of 256 threads per chunk of kSumSquaresChunk (8,192,
// kernels/formulas/common.h) elements of any part, every part of the call in one launch:
// total / 8,192 blocks. The chunk size sets the rounding (each chunk a fixed block tree, the
// chunks added in order by sum_squares_finalize_kernel) and is the CPU's chunking too, so it is
// not shrunk for small inputs: the rule holds from 2 * sm_count * 8,192 elements (2.2M on an
// H100). The guard sums every layer's activations in one call: 7.8M elements at dsstne-bench.
inline LaunchShape sum_squares_chunks_shape(uint64_t chunks) {
    LaunchShape s;
    s.grid = {unsigned(chunks > 0 ? chunks : 1), 1, 1};
    s.block = {256, 1, 1};
    return s;
}

// row_segment_squares_kernel (row_sum_squares of rows over 65,536 values): one block of 256
// threads per (8,192-value segment, row): grid (ceil(cols / 8,192), rows).
constexpr size_t kRowSegmentValues = 8192;
inline LaunchShape row_segments_shape(size_t rows, size_t cols) {
    LaunchShape s;
    s.grid = {unsigned(ceil_div(cols, kRowSegmentValues)), unsigned(rows > 0 ? rows : 1), 1};
    s.block = {256, 1, 1};
    return s;
}

// ---- exclusive scans (csr_weight_grad, kernels/cuda_csr_weight_grad.cu) ----
//
// Up to kSingleBlockScan values (32,768): one block of 1,024 threads, ceil(n / 1,024) values a
// thread (at most 32, in registers): one launch. Above: scan_totals_kernel and scan_apply_kernel
// with one block of 256 threads per tile of 2,048 values (8 per thread) and one block scanning
// the tiles' totals between them: three launches.
// Why: the scans of a step run over the input width (27,278 for ML-20M) or the batch (256); in
// the H100 profile the three-launch scan took 12 us of a step's 303 us of input gradient, twice
// per step, almost all of it launch and drain (each kernel moves about 100 KB).
constexpr size_t kScanTile = 2048;
constexpr unsigned kSingleBlockScanThreads = 1024;
constexpr size_t kSingleBlockScanItems = 32;
constexpr size_t kSingleBlockScan = kSingleBlockScanThreads * kSingleBlockScanItems;
inline bool single_block_scan(size_t n) {
    return n <= kSingleBlockScan;
}
inline LaunchShape scan_shape(size_t n) {
    LaunchShape s;
    if (single_block_scan(n)) {
        s.block = {kSingleBlockScanThreads, 1, 1};
        return s;
    }
    s.grid = {unsigned(ceil_div(n, kScanTile)), 1, 1};
    s.block = {256, 1, 1};
    return s;
}

// ---- csr_matmul (kernels/cuda_csr_matmul.cu) ----

// The thread mapping for output width n: lanes = 0 for the 512-column slices (n > 128), else
// `lanes` threads per batch row with `cols_per_lane` columns each (lanes * cols_per_lane >= n).
struct CsrMatmulMapping {
    int lanes = 0;
    int cols_per_lane = 0;
};
inline CsrMatmulMapping csr_matmul_mapping(size_t n) {
    if (n > 128) return {0, 0};  // slices of 512 columns
    if (n > 64) return {32, 4};
    if (n > 32) return {32, 2};
    int g = 1;
    while (size_t(g) < n) g <<= 1;
    return {g, 1};
}

// The parts each batch row's entries are split into (the slice mapping; the groups mapping: 1):
// the least power of two, up to kMaxCsrMatmulParts, that gives 16 blocks per SM for `rows` x
// `slices` blocks; `fixed` (SPARSENET_CSR_MATMUL_PARTS, read at each launch: 1 is the one-pass
// kernel) overrides it when it is an integer in [1, kMaxCsrMatmulParts]. The parts change the
// rounding (each part summed alone, then the parts in order), so the parity tests bound them
// against the CPU by the sum of |terms|, not bit for bit (docs/kernels.md).
constexpr int kMaxCsrMatmulParts = 16;
inline int csr_matmul_parts(size_t rows, size_t slices, int sm_count, const char* fixed) {
    if (fixed != nullptr && *fixed != '\0') {
        char* end = nullptr;
        const long p = std::strtol(fixed, &end, 10);
        if (*end == '\0' && p >= 1 && p <= kMaxCsrMatmulParts) return int(p);
    }
    // At least kBlocksPerSm blocks per SM (the H100's 132 SMs: 2,112 blocks), in powers of two.
    constexpr size_t kBlocksPerSm = 16;
    const size_t blocks = rows * slices, want = kBlocksPerSm * size_t(sm_count > 0 ? sm_count : 1);
    int parts = 1;
    while (parts < kMaxCsrMatmulParts && blocks * size_t(parts) < want) parts *= 2;
    return parts;
}

// csr_matmul's main launch for z: [rows, n]. Slices (n > 128): grid (rows, ceil(n / 512),
// parts), 128 threads (4 columns each); groups (n <= 128): 128 / lanes batch rows per block of
// 128 threads, grid ceil(rows / (128 / lanes)). `parts` is csr_matmul_parts' (1 for groups).
constexpr unsigned kCsrMatmulThreads = 128;
constexpr size_t kCsrMatmulSliceCols = 512;
inline LaunchShape csr_matmul_shape(size_t rows, size_t n, int parts) {
    LaunchShape s;
    s.block = {kCsrMatmulThreads, 1, 1};
    const CsrMatmulMapping m = csr_matmul_mapping(n);
    if (m.lanes == 0) {
        s.grid = {unsigned(rows), unsigned(ceil_div(n, kCsrMatmulSliceCols)), unsigned(parts)};
    } else {
        const size_t rows_per_block = kCsrMatmulThreads / unsigned(m.lanes);
        s.grid = {unsigned(ceil_div(rows, rows_per_block)), 1, 1};
    }
    return s;
}

// csr_matmul_combine_kernel: beta * z plus the parts, element by element over [rows, n],
// 256 elements per block, 8 blocks per SM (grid-striding).
inline LaunchShape csr_matmul_combine_shape(size_t rows, size_t n, int sm_count) {
    return grid_stride_shape(rows * n, 256, 256, 8, sm_count);
}

}  // namespace sparsenet::cuda

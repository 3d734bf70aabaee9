// Records every GEMM the engine issues (backend.h's GEMM observer) and checks each as a GPU would
// run it (backend/gemm_extents.h, issue 43 item 1): the extents that run along a contiguous
// dimension aligned wherever they are a layer's width of 64 or more, every leading dimension
// aligned, and the padding those extents read holding zeros. Used by
// tests/engine/gemm_shapes_test.cpp (one rank) and tests/mpi/mpi_model_parallel_test.cpp (a
// split network's ranks).
#pragma once

#include <cstddef>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/gemm_extents.h"

namespace sparsenet::testing {

struct RecordedGemms {
    std::set<std::string> shapes;     // "m x n x k (trans_a trans_b) ld a/b/c", distinct
    std::vector<std::string> faults;  // unaligned extents, nonzero padding
    size_t calls = 0;

    // The faults, one per line (empty: none).
    std::string fault_text() const {
        std::string text;
        for (const std::string& f : faults) text += "\n  " + f;
        return text;
    }
    std::string shape_text() const {
        std::string text;
        for (const std::string& s : shapes) text += "\n  " + s;
        return text;
    }
};

// The padding of v that extent `cols` runs over, [v.cols, cols) of every row, holds zeros.
inline bool padding_zero(const ConstMatrixView& v, size_t cols) {
    for (size_t r = 0; r < v.rows; ++r)
        for (size_t c = v.cols; c < cols; ++c)
            if (v.data[r * v.ld + c] != 0.0f) return false;
    return true;
}

inline void record_gemm(const GemmCall& call, void* context) {
    auto* rec = static_cast<RecordedGemms*>(context);
    ++rec->calls;
    const GemmExtents e =
        gpu_gemm_extents(call.trans_a, call.trans_b, call.a, call.b, call.c, kGemmVectorFloats);
    std::ostringstream shape;
    shape << e.m << " x " << e.n << " x " << e.k << " (" << (call.trans_a ? 'T' : 'N')
          << (call.trans_b ? 'T' : 'N') << ") ld " << call.a.ld << "/" << call.b.ld << "/"
          << call.c.ld;
    rec->shapes.insert(shape.str());
    auto fault = [&](const std::string& what) { rec->faults.push_back(shape.str() + ": " + what); };
    // The extents along a contiguous dimension: n (C's columns), k where it is A's columns
    // (A not transposed) or B's (B transposed), m where it is A's columns (A transposed). The
    // batch only ever runs along rows.
    auto aligned = [&](size_t extent, const char* name) {
        if (extent >= 64 && extent % kGemmVectorFloats != 0)
            fault(std::string(name) + " unaligned");
    };
    aligned(e.n, "n");
    if (!call.trans_a || call.trans_b) aligned(e.k, "k");
    if (call.trans_a) aligned(e.m, "m");
    for (const ConstMatrixView* v : {&call.a, &call.b, &call.c})
        if (v->rows > 1 && v->ld % kGemmVectorFloats != 0) fault("a leading dimension unaligned");
    // The padding the extents run over is zeros (C's is read only where beta is not 0).
    if (e.n > call.c.cols && !padding_zero(call.b, e.n)) fault("b's padding is not zero");
    if (e.n > call.c.cols && call.beta != 0.0f && !padding_zero(call.c, e.n))
        fault("c's padding is not zero");
    if (e.k > (call.trans_a ? call.a.rows : call.a.cols)) {
        if (!padding_zero(call.a, e.k)) fault("a's padding is not zero");
        if (!padding_zero(call.b, e.k)) fault("b's padding is not zero");
    }
}

// Records every GEMM of the process while it lives.
class GemmRecorder {
  public:
    GemmRecorder() { set_gemm_observer(record_gemm, &rec_); }
    ~GemmRecorder() { set_gemm_observer(nullptr, nullptr); }
    GemmRecorder(const GemmRecorder&) = delete;
    GemmRecorder& operator=(const GemmRecorder&) = delete;
    const RecordedGemms& result() const { return rec_; }

  private:
    RecordedGemms rec_;
};

}  // namespace sparsenet::testing

// The CPU's BF16 GEMM kernels: the process's choice and oneDNN's matmul (bf16_matmul.h).
#include "backend/cpu/bf16_matmul.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend/cpu/bf16_emulation.h"
#include "formulas/precision.h"
#include "sparsenet/error.h"

#if defined(SPARSENET_WITH_ONEDNN)
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace sparsenet::cpu {

const char* to_string(Bf16Kernel k) {
    return k == Bf16Kernel::kOnednn ? "onednn" : "emulation";
}

namespace {

// omp_set_num_threads for the calling thread while in scope: oneDNN's OpenMP build sizes its
// parallel regions (and, at creation, its blocking) by omp_get_max_threads().
class ScopedOmpThreads {
  public:
    explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()) {
        omp_set_num_threads(threads);
    }
    ~ScopedOmpThreads() { omp_set_num_threads(saved_); }
    ScopedOmpThreads(const ScopedOmpThreads&) = delete;
    ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

  private:
    int saved_;
};

// The start-up probe's product: [kProbeRows, kProbe] . [kProbe, kProbe].
constexpr size_t kProbe = 1024, kProbeRows = 512;

std::string gflops(double seconds) {
    const double flops = 2.0 * double(kProbeRows) * double(kProbe) * double(kProbe);
    return std::to_string(int(flops / seconds / 1e9 + 0.5));
}

}  // namespace

Bf16Choice choose_bf16_kernel(const std::string& forced, const Bf16Probe& p,
                              const std::string& amx_gemm_env) {
    if (!forced.empty() && forced != "auto" && forced != "onednn" && forced != "emulation")
        throw Error(
            ErrorCategory::kUsage,
            "SPARSENET_CPU_BF16_KERNEL: expected auto, onednn or emulation, got '" + forced + "'");
    if (!amx_gemm_env.empty() && amx_gemm_env != "0" && amx_gemm_env != "1")
        throw Error(ErrorCategory::kUsage,
                    "SPARSENET_CPU_AMX_GEMM: expected 0 or 1, got '" + amx_gemm_env + "'");
    Bf16Choice choice;
    if (forced == "emulation") {
        choice.line = "bf16 GEMMs -> emulation (SPARSENET_CPU_BF16_KERNEL=emulation" +
                      (p.isa.empty() ? std::string() : "; CPU ISA " + p.isa) + ")";
        return choice;
    }
    if (!p.available) {
        if (forced == "onednn")
            throw Error(ErrorCategory::kUsage,
                        "SPARSENET_CPU_BF16_KERNEL=onednn, but oneDNN cannot run BF16 matmuls "
                        "here: " +
                            p.error);
        choice.line =
            "bf16 GEMMs -> emulation (FP32 sgemm on BF16-rounded operands: " + p.error + ")";
        return choice;
    }
    choice.kernel = Bf16Kernel::kOnednn;
    if (forced == "onednn") {
        choice.line = "bf16 GEMMs -> onednn " + p.impl +
                      " (SPARSENET_CPU_BF16_KERNEL=onednn; CPU ISA " + p.isa + ")";
    } else if (p.amx) {
        choice.line = "bf16 GEMMs -> onednn " + p.impl + " (CPU ISA " + p.isa + ": AMX)";
    } else if (p.onednn_s <= 0 || p.emulation_s <= 0) {
        throw Error(ErrorCategory::kInternal,
                    "bf16 kernel choice: without AMX both kernels must have been timed");
    } else {
        const bool faster = p.onednn_s < p.emulation_s;
        choice.kernel = faster ? Bf16Kernel::kOnednn : Bf16Kernel::kEmulation;
        choice.line = std::string("bf16 GEMMs -> ") + (faster ? "onednn " + p.impl : "emulation") +
                      " (CPU ISA " + p.isa + ", no AMX: at 512 x 1024 x 1024 oneDNN's " + p.impl +
                      " ran " + gflops(p.onednn_s) +
                      " GFLOP/s, the FP32 sgemm on widened operands " + gflops(p.emulation_s) + ")";
    }
    if (choice.kernel == Bf16Kernel::kOnednn && p.amx) {
        choice.amx_gemm = amx_gemm_env != "0";
        choice.line += choice.amx_gemm
                           ? "; wide weight gradients -> amx_gemm_tn (update and copy fused)"
                           : "; wide weight gradients on onednn (SPARSENET_CPU_AMX_GEMM=0)";
    }
    return choice;
}

#if defined(SPARSENET_WITH_ONEDNN)

namespace {

const char* isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
        case dnnl::cpu_isa::avx512_core_amx:
            return "avx512_core_amx";
        case dnnl::cpu_isa::avx512_core_bf16:
            return "avx512_core_bf16";
        case dnnl::cpu_isa::avx512_core_vnni:
            return "avx512_core_vnni";
        case dnnl::cpu_isa::avx512_core:
            return "avx512_core";
        case dnnl::cpu_isa::avx2_vnni:
            return "avx2_vnni";
        case dnnl::cpu_isa::avx2:
            return "avx2";
        case dnnl::cpu_isa::avx:
            return "avx";
        case dnnl::cpu_isa::sse41:
            return "sse41";
        default:
            return "other";
    }
}

// The ISAs are bit sets: a CPU has isa when every bit of it is set in the effective one.
bool has_isa(dnnl::cpu_isa effective, dnnl::cpu_isa isa) {
    return (unsigned(effective) & unsigned(isa)) == unsigned(isa);
}

}  // namespace

// How beta enters a primitive: 0 (c overwritten), 1 (a sum post-op), or any other value, read
// at run time like alpha (the fused SGD step with L2 passes beta = 1 - lr l2, which follows the
// learning rate's schedule): c := beta (alpha / beta . ab + c), a multiply after the sum.
enum class BetaKind { kZero, kOne, kRunTime };
BetaKind beta_kind(float beta) {
    if (beta == 0.0f) return BetaKind::kZero;
    if (beta == 1.0f) return BetaKind::kOne;
    return BetaKind::kRunTime;
}

struct OnednnMatmul::Impl {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    struct Entry {
        dnnl::matmul primitive;
        dnnl::memory::desc a, b, c, scratchpad, scalar;
        BetaKind beta = BetaKind::kZero;
    };
    // (trans_a, trans_b, m, n, k, beta kind, threads)
    using Key = std::tuple<bool, bool, size_t, size_t, size_t, BetaKind, int>;
    std::map<Key, Entry> cache;
    std::vector<uint8_t> scratchpad;  // grown to the largest primitive's need, never shrunk
    std::string last_impl;

    Entry& entry(bool ta, bool tb, size_t m, size_t n, size_t k, BetaKind beta, int threads) {
        const Key key{ta, tb, m, n, k, beta, threads};
        auto it = cache.find(key);
        if (it != cache.end()) return it->second;
        using dt = dnnl::memory::data_type;
        using dims = dnnl::memory::dims;
        const auto M = dnnl::memory::dim(m), N = dnnl::memory::dim(n), K = dnnl::memory::dim(k);
        // Row-major [rows, cols] as strides; a transposed operand is the stored matrix read
        // column-major.
        Entry e;
        e.beta = beta;
        e.a = dnnl::memory::desc({M, K}, dt::bf16, ta ? dims{1, M} : dims{K, 1});
        e.b = dnnl::memory::desc({K, N}, dt::bf16, tb ? dims{1, K} : dims{N, 1});
        e.c = dnnl::memory::desc({M, N}, dt::f32, dims{N, 1});
        e.scalar = dnnl::memory::desc({1, 1}, dt::f32, dims{1, 1});
        dnnl::post_ops ops;
        ops.append_binary(dnnl::algorithm::binary_mul, e.scalar);  // alpha (or alpha / beta)
        if (beta != BetaKind::kZero) ops.append_sum(1.0f);
        if (beta == BetaKind::kRunTime) ops.append_binary(dnnl::algorithm::binary_mul, e.scalar);
        dnnl::primitive_attr attr;
        attr.set_post_ops(ops);
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        const ScopedOmpThreads scoped(threads);  // the blocking depends on the thread count
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.a, e.b, e.c), attr, engine);
        last_impl = pd.impl_info_str();
        e.scratchpad = pd.scratchpad_desc();
        e.primitive = dnnl::matmul(pd);
        return cache.emplace(key, std::move(e)).first->second;
    }

    void execute(Entry& e, const uint16_t* a, const uint16_t* b, float* c, float alpha,
                 float beta) {
        if (scratchpad.size() < e.scratchpad.get_size()) scratchpad.resize(e.scratchpad.get_size());
        float first = e.beta == BetaKind::kRunTime ? alpha / beta : alpha;
        float second = beta;
        // oneDNN's memory objects take non-const handles; it only reads a, b and the scalars.
        dnnl::memory am(e.a, engine, const_cast<uint16_t*>(a));
        dnnl::memory bm(e.b, engine, const_cast<uint16_t*>(b));
        dnnl::memory cm(e.c, engine, c);
        dnnl::memory first_m(e.scalar, engine, &first), second_m(e.scalar, engine, &second);
        dnnl::memory scratch_m(e.scratchpad, engine, scratchpad.data());
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, am},
            {DNNL_ARG_WEIGHTS, bm},
            {DNNL_ARG_DST, cm},
            {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, first_m},
            {DNNL_ARG_SCRATCHPAD, scratch_m}};
        if (e.beta == BetaKind::kRunTime)
            args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(2) | DNNL_ARG_SRC_1, second_m);
        e.primitive.execute(stream, args);
        stream.wait();
    }
};

namespace {

Error matmul_error(const dnnl::error& err, size_t m, size_t n, size_t k) {
    return Error(ErrorCategory::kInternal, std::string("gemm: oneDNN's BF16 matmul failed (") +
                                               err.what() + ") at m " + std::to_string(m) + ", n " +
                                               std::to_string(n) + ", k " + std::to_string(k));
}

void check_extents(size_t m, size_t n, size_t k, float beta) {
    if (m == 0 || n == 0 || k == 0)
        throw Error(ErrorCategory::kInternal, "gemm: oneDNN's BF16 matmul given an empty extent");
    // alpha / beta: a beta this small would overflow it (never the engine's: 0, 1, mu, 1 - lr l2).
    if (beta != 0.0f && std::fabs(beta) < 1e-30f)
        throw Error(ErrorCategory::kInternal, "gemm: oneDNN's BF16 matmul given |beta| < 1e-30");
}

}  // namespace

OnednnMatmul::OnednnMatmul() = default;
OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::run(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                       const uint16_t* a, const uint16_t* b, float beta, float* c, int threads) {
    check_extents(m, n, k, beta);
    if (!impl_) impl_ = std::make_unique<Impl>();
    try {
        Impl::Entry& e = impl_->entry(trans_a, trans_b, m, n, k, beta_kind(beta), threads);
        const ScopedOmpThreads scoped(threads);
        impl_->execute(e, a, b, c, alpha, beta);
    } catch (const dnnl::error& err) {
        throw matmul_error(err, m, n, k);
    }
}

const std::string& OnednnMatmul::last_implementation() const {
    static const std::string none;
    return impl_ ? impl_->last_impl : none;
}

size_t OnednnMatmul::primitives() const {
    return impl_ ? impl_->cache.size() : 0;
}

namespace {

// Seconds of the fastest of three calls of f (after one warm-up).
template <class F>
double best_of_three(F&& f) {
    f();
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

Bf16Probe probe(bool time_both) {
    Bf16Probe p;
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    p.isa = isa_name(isa);
    p.amx = has_isa(isa, dnnl::cpu_isa::avx512_core_amx);
    if (!has_isa(isa, dnnl::cpu_isa::avx512_core_bf16)) {
        p.error = "the CPU (oneDNN ISA " + p.isa + ") has no BF16 instructions";
        return p;
    }
    std::vector<uint16_t> a(kProbeRows * kProbe), b(kProbe * kProbe);
    for (size_t i = 0; i < a.size(); ++i) a[i] = formulas::bf16_bits(float(i % 7) * 0.125f);
    for (size_t i = 0; i < b.size(); ++i) b[i] = formulas::bf16_bits(float(i % 5) * 0.25f);
    std::vector<float> c(kProbeRows * kProbe);
    OnednnMatmul mm;
    const int threads = omp_get_max_threads();
    try {
        mm.run(false, false, kProbeRows, kProbe, kProbe, 1.0f, a.data(), b.data(), 0.0f, c.data(),
               threads);
    } catch (const Error& e) {
        p.error = e.what();
        return p;
    }
    p.available = true;
    p.impl = mm.last_implementation();
    if (!time_both) return p;
    p.onednn_s = best_of_three([&] {
        mm.run(false, false, kProbeRows, kProbe, kProbe, 1.0f, a.data(), b.data(), 0.0f, c.data(),
               threads);
    });
    // The emulation's cost: the operands widened block by block, then sgemm (bf16_emulation.h).
    std::vector<float> sa, sb;
    const CMatT<float> am(nullptr, kProbeRows, kProbe, kProbe), bm(nullptr, kProbe, kProbe, kProbe);
    p.emulation_s = best_of_three([&] {
        gemm_bf16_emulated(false, false, 1.0f, {am, a.data()}, {bm, b.data()}, 0.0f,
                           MatT<float>{c.data(), kProbeRows, kProbe, kProbe}, nullptr, sa, sb,
                           threads);
    });
    return p;
}

Bf16Choice decide() {
    const char* env = std::getenv("SPARSENET_CPU_BF16_KERNEL");
    const std::string forced = env != nullptr ? env : "";
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    Bf16Probe p;
    if (forced != "emulation") {
        // Both kernels timed only where the choice depends on it (AVX512-BF16 without AMX).
        const bool amx = has_isa(isa, dnnl::cpu_isa::avx512_core_amx);
        p = probe(!amx && (forced.empty() || forced == "auto"));
    }
    p.isa = isa_name(isa);
    const char* amx_gemm = std::getenv("SPARSENET_CPU_AMX_GEMM");
    return choose_bf16_kernel(forced, p, amx_gemm != nullptr ? amx_gemm : "");
}

}  // namespace

bool built_with_onednn() {
    return true;
}

bool onednn_bf16_available() {
    static const bool available = probe(false).available;
    return available;
}

const Bf16Choice& bf16_choice() {
    static const Bf16Choice choice = decide();
    return choice;
}

#else  // without oneDNN

struct OnednnMatmul::Impl {};
OnednnMatmul::OnednnMatmul() = default;
OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::run(bool, bool, size_t, size_t, size_t, float, const uint16_t*, const uint16_t*,
                       float, float*, int) {
    throw Error(ErrorCategory::kNotImplemented,
                "gemm: this build has no oneDNN (configure with -DSPARSENET_ONEDNN=ON after "
                "scripts/install-deps)");
}

const std::string& OnednnMatmul::last_implementation() const {
    static const std::string none;
    return none;
}

size_t OnednnMatmul::primitives() const {
    return 0;
}

bool built_with_onednn() {
    return false;
}

bool onednn_bf16_available() {
    return false;
}

const Bf16Choice& bf16_choice() {
    static const Bf16Choice choice = [] {
        const char* env = std::getenv("SPARSENET_CPU_BF16_KERNEL");
        Bf16Probe p;
        p.error =
            "this build has no oneDNN (configure with -DSPARSENET_ONEDNN=ON after "
            "scripts/install-deps)";
        return choose_bf16_kernel(env != nullptr ? env : "", p);
    }();
    return choice;
}

#endif

}  // namespace sparsenet::cpu

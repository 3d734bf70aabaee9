// Shared pieces of the Python extension sparsenet._core (python/src/*.cpp): arrays over
// library-filled buffers, conversions of numpy arrays, and the binders of each part. The
// extension binds the public API (include/sparsenet) only.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <omp.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparsenet/dataset.h"
#include "sparsenet/error.h"

namespace sparsenet::python {

namespace nb = nanobind;

// A numpy array owning `v` (moved to the heap, freed with the array): no copy of the elements.
template <class T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& v, std::initializer_list<size_t> shape) {
    auto* heap = new std::vector<T>(std::move(v));
    nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::ndarray<nb::numpy, T>(heap->data(), shape, owner);
}

// Any 1-D numeric array on the CPU (the Python layer makes it contiguous).
using AnyArray = nb::ndarray<nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// The elements of `a` as Out. Index arrays (is_index) must hold integers in [0, max]; values
// arrays floats or integers. Errors are Error(kData) naming `what`.
template <class Out>
std::vector<Out> to_vector(const AnyArray& a, const std::string& what, bool is_index,
                           uint64_t max = UINT64_MAX);

// The OpenMP threads of the calling thread (what `sparsenet --threads N` sets with
// omp_set_num_threads) for the scope of a call; 0 leaves them.
class ThreadScope {
  public:
    explicit ThreadScope(int threads) : saved_(omp_get_max_threads()), set_(threads > 0) {
        if (set_) omp_set_num_threads(threads);
    }
    ~ThreadScope() {
        if (set_) omp_set_num_threads(saved_);
    }
    ThreadScope(const ThreadScope&) = delete;
    ThreadScope& operator=(const ThreadScope&) = delete;

  private:
    int saved_;
    bool set_;
};

void bind_errors(nb::module_& m);
void bind_dataset(nb::module_& m);
void bind_network(nb::module_& m);
void bind_recommender(nb::module_& m);
void bind_ann_index(nb::module_& m);

}  // namespace sparsenet::python

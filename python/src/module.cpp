// sparsenet._core: the extension module. The typed, documented API is the package's
// (python/sparsenet/__init__.py); this module is its native half (stubs in _core.pyi).
#include <nanobind/stl/string.h>

#include "common.h"

NB_MODULE(_core, m) {
    using namespace sparsenet::python;
    m.doc() = "sparsenet's native half: the public C++ API (include/sparsenet) bound with nanobind";
#ifdef SPARSENET_VERSION
    m.attr("__version__") = SPARSENET_VERSION;
#endif
    m.def("omp_max_threads", [] { return omp_get_max_threads(); });
    bind_errors(m);
    bind_dataset(m);
    bind_network(m);
    bind_recommender(m);
    bind_ann_index(m);
}

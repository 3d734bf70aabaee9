"""sparsenet: sparse deep learning for recommendations (DSSTNE's lineage), from Python.

A thin, typed layer over the C++ library's public API (include/sparsenet): datasets from and to
scipy.sparse and netCDF, text conversion, networks in DSSTNE's JSON language trained and used
exactly as the ``sparsenet`` command does, and a thread-safe Recommender. docs/python.md has a
walk-through.
"""

import os as _os


def _select_openblas_kernels() -> None:
    """As the ``sparsenet`` command does (tools/main.cpp): OpenBLAS 0.3.21 does not recognise
    recent AVX-512 CPUs and falls back to slow kernels, so OPENBLAS_CORETYPE=SkylakeX is set on
    CPUs with AVX-512 before the library (and with it OpenBLAS) is loaded, unless the variable is
    set already. The same kernels as the CLI's also make results equal the CLI's bit for bit."""
    if "OPENBLAS_CORETYPE" in _os.environ:
        return
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    if " avx512f" in line:
                        _os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
                    return
    except OSError:
        pass


_select_openblas_kernels()

# The imports follow the OpenBLAS selection above on purpose.
from ._core import __version__  # noqa: E402
from ._dataset import Converted, Dataset, convert, evaluate, read_index  # noqa: E402
from ._dataset import write_datasets, write_index, write_recs  # noqa: E402
from ._errors import CommunicationError, ConfigError, DataError, DeviceError  # noqa: E402
from ._errors import Error, FileError, InternalError, NotImplementedFeature  # noqa: E402
from ._errors import NumericError, UsageError  # noqa: E402
from ._network import Network  # noqa: E402
from ._recommender import Recommendations, Recommender, build_ann_index  # noqa: E402

__all__ = [
    "__version__", "Dataset", "Converted", "convert", "evaluate", "read_index", "write_index",
    "write_datasets", "write_recs", "Network", "Recommender", "Recommendations",
    "build_ann_index", "Error", "ConfigError", "DataError", "FileError", "DeviceError", "CommunicationError",
    "NumericError", "UsageError", "NotImplementedFeature", "InternalError",
]

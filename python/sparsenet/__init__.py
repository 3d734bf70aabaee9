"""sparsenet: sparse deep learning for recommendations (DSSTNE's lineage), from Python.

A thin, typed layer over the C++ library's public API (include/sparsenet): datasets from and to
scipy.sparse and netCDF, text conversion, networks in DSSTNE's JSON language trained and used
exactly as the ``sparsenet`` command does, and a thread-safe Recommender. docs/python.md has a
walk-through.
"""

from ._core import __version__
from ._dataset import (Converted, Dataset, convert, evaluate, read_index, write_datasets,
                       write_index, write_recs)
from ._errors import (CommunicationError, ConfigError, DataError, DeviceError, Error, FileError,
                      InternalError, NotImplementedFeature, NumericError, UsageError)
from ._network import Network
from ._recommender import Recommendations, Recommender

__all__ = [
    "__version__", "Dataset", "Converted", "convert", "evaluate", "read_index", "write_index",
    "write_datasets", "write_recs", "Network", "Recommender", "Recommendations", "Error",
    "ConfigError", "DataError", "FileError", "DeviceError", "CommunicationError",
    "NumericError", "UsageError", "NotImplementedFeature", "InternalError",
]

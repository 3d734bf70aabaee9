# The native half of the sparsenet package (python/src/*.cpp), for type checkers. Generated with
# `PYTHONPATH=build/python build/pyenv/bin/python -m nanobind.stubgen -m sparsenet._core -o python/sparsenet/_core.pyi`
# (then this header); the typed API is the package's own (python/sparsenet/*.py, py.typed).
from collections.abc import Mapping, Sequence
from typing import Annotated

import numpy
from numpy.typing import NDArray


def omp_max_threads() -> int: ...

class Dataset:
    """A CSR dataset held by the library (sparsenet::Dataset)."""

    @staticmethod
    def from_csr(indptr: Annotated[NDArray, dict(shape=(None,), order='C', device='cpu')], indices: Annotated[NDArray, dict(shape=(None,), order='C', device='cpu')], data: Annotated[NDArray, dict(shape=(None,), order='C', device='cpu')] | None, rows: int, cols: int, name: str, weights: Annotated[NDArray, dict(shape=(None,), order='C', device='cpu')] | None = None) -> Dataset:
        """
        A dataset from CSR arrays (copied into the library's layout and checked).
        """

    @staticmethod
    def read(path: str, name: str = '') -> Dataset:
        """Dataset `name` (or the first) of a netCDF file."""

    @staticmethod
    def read_all(path: str) -> list[Dataset]:
        """Every dataset of a netCDF file, in file order."""

    @staticmethod
    def list(path: str) -> list[str]:
        """The names of the datasets in a netCDF file."""

    @property
    def name(self) -> str: ...

    @name.setter
    def name(self, arg: str, /) -> None: ...

    @property
    def rows(self) -> int: ...

    @property
    def cols(self) -> int: ...

    @property
    def dense(self) -> bool: ...

    @property
    def sparse_ignore_zero(self) -> bool: ...

    @sparse_ignore_zero.setter
    def sparse_ignore_zero(self, arg: bool, /) -> None: ...

    @property
    def nnz(self) -> int: ...

    @property
    def examples(self) -> int: ...

    @property
    def is_boolean(self) -> bool: ...

    @property
    def is_indexed(self) -> bool: ...

    @property
    def is_weighted(self) -> bool: ...

    @property
    def indptr(self) -> Annotated[NDArray[numpy.uint64], dict(shape=(None,), writable=False)]:
        """
        Row offsets (uint64, rows + 1): a read-only view of the library's buffer.
        """

    @property
    def indices(self) -> Annotated[NDArray[numpy.uint32], dict(shape=(None,), writable=False)]:
        """Column ids (uint32, nnz): a read-only view of the library's buffer."""

    @property
    def data(self) -> object:
        """
        Values (float32, nnz), a read-only view; None for boolean data (every entry 1).
        """

    @property
    def weights(self) -> object:
        """Per-example weights (float32), a read-only view; None when unweighted."""

    def expanded(self) -> Dataset:
        """One CSR row per example (indexed data expanded)."""

    def renamed(self, name: str) -> Dataset:
        """A copy named `name`."""

def write_datasets(path: str, datasets: Sequence[Dataset]) -> None:
    """Writes datasets to one netCDF-4 file (DSSTNE's layout), atomically."""

def convert_text(paths: Sequence[str], name: str, format: str, analog: bool, min_rating: float | None, ids: str, features: Sequence[str] | None, grow_features: bool, drop_unknown: bool, samples: Sequence[str] | None, grow_samples: bool) -> tuple:
    """
    convert_text (sparsenet/convert.h): (dataset, sample labels, feature labels, stats).
    """

def read_index(path: str) -> list[str]:
    """A DSSTNE index file ('label<TAB>index' lines): labels by index."""

def write_index(path: str, labels: Sequence[str]) -> None:
    """Writes labels as a DSSTNE index file, atomically."""

def evaluate_ranking(ids: Annotated[NDArray[numpy.uint32], dict(shape=(None, None), order='C', device='cpu', writable=False)], scores: Annotated[NDArray[numpy.float32], dict(shape=(None, None), order='C', device='cpu', writable=False)], heldout: Dataset, ks: Sequence[int], items: int = 0) -> dict:
    """evaluate_ranking (sparsenet/metrics.h) as {'recall@20': ...}."""

def write_recs(path: str, ids: Annotated[NDArray[numpy.uint32], dict(shape=(None, None), order='C', device='cpu', writable=False)], scores: Annotated[NDArray[numpy.float32], dict(shape=(None, None), order='C', device='cpu', writable=False)], sample_names: Sequence[str] = [], feature_names: Sequence[str] = []) -> None:
    """Writes top-K lists in `sparsenet predict`'s recs format."""

def parse_config(text: str, source: str = '<string>') -> tuple:
    """
    Parses and checks a network config: (canonical JSON, layers, training defaults).
    """

def read_config(path: str) -> tuple:
    """parse_config of a file."""

class Network:
    """A sparsenet::Network (config + weights on a backend)."""

    @staticmethod
    def create(config: str, source: str, widths: Mapping[str, int], device: str, threads: int, seed: int, batch: int = 0, precision: str = '') -> Network: ...

    @staticmethod
    def load(path: str, device: str, threads: int, precision: str = '') -> Network: ...

    def save(self, path: str) -> None: ...

    def config_json(self) -> str: ...

    def layers(self) -> list: ...

    @property
    def device(self) -> str: ...

    @property
    def precision(self) -> str: ...

    @precision.setter
    def precision(self, arg: str, /) -> None: ...

    @property
    def threads(self) -> int: ...

    def layer_size(self, arg: str, /) -> int: ...

    def parameters(self) -> list[tuple[str, int, int]]: ...

    def get_parameter(self, name: str) -> NDArray[numpy.float32]: ...

    def set_parameter(self, name: str, values: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)]) -> None: ...

    def fit(self, datasets: Mapping[str, Dataset], options: dict, on_batch: object | None, on_epoch: object | None, early_stop: object | None, validation_input: Dataset | None, validation_target: Dataset | None, validate_k: Sequence[int], keep_best: tuple[str, int] | None, patience: int) -> list: ...

    def cancel(self) -> bool:
        """
        Stops a running fit() after the batch in progress; False when none runs.
        """

    def predict(self, inputs: Mapping[str, Dataset], k: int, batch: int, output_layer: str, exclude: Dataset | None, exclude_inputs: bool) -> tuple[NDArray[numpy.uint32], NDArray[numpy.float32]]: ...

    def scores(self, inputs: Mapping[str, Dataset], output_layer: str) -> NDArray[numpy.float32]: ...

    def close(self) -> None: ...

class Recommender:
    """sparsenet::Recommender: thread-safe serving."""

    def __init__(self, path: str, features_index: str, device: str, output_layer: str, threads_per_call: int, max_concurrent_calls: int, max_batch: int, fp16_screening: bool, ann_index: str, ann_probe: int, ann_fetch: int, precision: str = '', bf16_weights_only: bool = False, bf16_input_weights: bool = False) -> None: ...

    def recommend(self, items: object, k: int, exclude_inputs: bool, allow: object | None, deny: object | None, ignore_unknown: bool) -> tuple: ...

    def recommend_batch(self, queries: object, k: int, exclude_inputs: bool, allow: object | None, deny: object | None, ignore_unknown: bool) -> list: ...

    @property
    def input_items(self) -> int: ...

    @property
    def output_items(self) -> int: ...

    @property
    def has_names(self) -> bool: ...

    @property
    def screening(self) -> bool: ...

    @property
    def ann(self) -> bool: ...

    @property
    def ann_queries(self) -> int: ...

    @property
    def ann_fallbacks(self) -> int: ...

    def id_of(self, name: str) -> int: ...

    def name_of(self, id: int) -> str: ...

def ann_index_available(kind: str = "ivf") -> bool: ...

def build_ann_index(model: str, out: str, kind: str, hnsw_m: int, ef_construction: int, probe: int, threads: int, output_layer: str, vectors: str, cells: int) -> dict: ...

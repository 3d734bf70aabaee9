"""Datasets: scipy.sparse <-> the library's CSR datasets, netCDF files, text conversion, metrics."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _core

PathLike = Union[str, "os.PathLike[str]"]


def _csr(matrix: Any):
    """`matrix` (any scipy.sparse matrix or array, or a 2-D numpy array) as canonical CSR:
    sorted column ids, no duplicates (summed), no explicit zeros dropped."""
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        a = np.asarray(matrix)
        if a.ndim != 2:
            raise _core_error("DataError", f"expected a 2-D matrix; got an array of shape {a.shape}")
        matrix = sp.csr_array(a)
    if len(matrix.shape) != 2:
        raise _core_error("DataError", f"expected a 2-D matrix; got shape {matrix.shape}")
    m = matrix.tocsr()
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()  # sorts too
    return m


def _core_error(name: str, message: str) -> Exception:
    from . import _errors

    return getattr(_errors, name)(message)


class Dataset:
    """A CSR dataset held by the library (one row per example, columns = features).

    Build one from scipy with :meth:`from_scipy`, read one from a netCDF file with :meth:`load`,
    convert text with :func:`sparsenet.convert`. ``indptr``, ``indices`` and ``data`` are
    read-only numpy views of the library's own buffers (no copy); :meth:`to_scipy` makes a
    scipy CSR array from them.
    """

    __slots__ = ("_native",)

    def __init__(self, native: "_core.Dataset"):
        self._native = native

    @classmethod
    def from_scipy(cls, matrix: Any, name: str = "data", *, boolean: Optional[bool] = None,
                   weights: Optional[Sequence[float]] = None) -> "Dataset":
        """A dataset from a scipy.sparse matrix (any format; CSR is used as is when canonical)
        or a dense 2-D array.

        ``boolean``: store no values (every entry 1, DSSTNE's indicator data); default: when
        every stored value is 1. ``weights``: one weight per row (DSSTNE's dataWeight).
        The CSR arrays are copied once into the library's layout (uint64 offsets, uint32
        column ids, float32 values) and checked; errors raise :class:`sparsenet.DataError`.
        """
        m = _csr(matrix)
        data = np.ascontiguousarray(m.data)
        if boolean is None:
            boolean = bool(np.all(data == 1))
        w = None if weights is None else np.ascontiguousarray(weights, dtype=np.float32)
        native = _core.Dataset.from_csr(
            np.ascontiguousarray(m.indptr), np.ascontiguousarray(m.indices),
            None if boolean else data, int(m.shape[0]), int(m.shape[1]), name, w)
        return cls(native)

    @classmethod
    def load(cls, path: PathLike, name: Optional[str] = None) -> "Dataset":
        """Dataset ``name`` (default: the first) of a netCDF file in DSSTNE's layout."""
        return cls(_core.Dataset.read(os.fspath(path), name or ""))

    @staticmethod
    def load_all(path: PathLike) -> Dict[str, "Dataset"]:
        """Every dataset of a netCDF file, by name, in file order."""
        return {d.name: Dataset(d) for d in _core.Dataset.read_all(os.fspath(path))}

    @staticmethod
    def names(path: PathLike) -> List[str]:
        """The names of the datasets of a netCDF file (no data read)."""
        return _core.Dataset.list(os.fspath(path))

    def save(self, path: PathLike) -> None:
        """Writes this dataset as a netCDF-4 file (DSSTNE's layout), atomically."""
        write_datasets(path, [self])

    def to_scipy(self):
        """A ``scipy.sparse.csr_array`` with the same rows, columns and values (float32; 1.0
        for boolean data). Indexed datasets are expanded to one row per example. scipy wants
        signed index arrays, so the ids are converted (one copy)."""
        import scipy.sparse as sp

        d = self.expanded() if self.is_indexed else self
        index_dtype = np.int32 if d.nnz < 2**31 and d.cols < 2**31 else np.int64
        indptr = d.indptr.astype(index_dtype)
        indices = d.indices.astype(index_dtype)
        data = np.ones(d.nnz, dtype=np.float32) if d.is_boolean else np.array(d.data)
        return sp.csr_array((data, indices, indptr), shape=(int(d.rows), int(d.cols)))

    def expanded(self) -> "Dataset":
        """One stored row per example (an indexed dataset expanded; else a copy)."""
        return Dataset(self._native.expanded())

    def renamed(self, name: str) -> "Dataset":
        """A copy named ``name``."""
        return Dataset(self._native.renamed(name))

    @property
    def name(self) -> str:
        return self._native.name

    @name.setter
    def name(self, value: str) -> None:
        self._native.name = value

    @property
    def shape(self) -> tuple:
        """(examples, columns)."""
        return (int(self._native.examples), int(self._native.cols))

    rows = property(lambda self: int(self._native.rows), doc="Stored CSR rows.")
    cols = property(lambda self: int(self._native.cols), doc="Columns (features).")
    nnz = property(lambda self: int(self._native.nnz), doc="Stored entries.")
    examples = property(lambda self: int(self._native.examples), doc="Examples (rows, expanded).")
    is_boolean = property(lambda self: self._native.is_boolean, doc="No values: every entry is 1.")
    is_indexed = property(lambda self: self._native.is_indexed, doc="DSSTNE's Indexed dataset.")
    indptr = property(lambda self: self._native.indptr,
                      doc="Row offsets, uint64 (rows + 1), a read-only view (no copy).")
    indices = property(lambda self: self._native.indices,
                       doc="Column ids, uint32 (nnz), a read-only view (no copy).")
    data = property(lambda self: self._native.data,
                    doc="Values, float32 (nnz), a read-only view; None for boolean data.")
    weights = property(lambda self: self._native.weights,
                       doc="Per-example weights, float32, read-only; None when unweighted.")

    def __repr__(self) -> str:
        kind = "boolean" if self.is_boolean else "valued"
        return (f"Dataset(name={self.name!r}, shape={self.shape}, nnz={self.nnz}, {kind}"
                f"{', indexed' if self.is_indexed else ''})")


def as_dataset(x: Any, name: str = "data") -> Dataset:
    """``x`` if it is a Dataset, else :meth:`Dataset.from_scipy` of it."""
    return x if isinstance(x, Dataset) else Dataset.from_scipy(x, name)


def write_datasets(path: PathLike, datasets: Iterable[Dataset]) -> None:
    """Writes datasets into one netCDF-4 file (generateNetCDF's layout), atomically: e.g. the
    input and output datasets of an autoencoder, which ``sparsenet train -i`` then reads."""
    _core.write_datasets(os.fspath(path), [d._native for d in datasets])


class Converted(NamedTuple):
    """What :func:`convert` returns: the dataset, the samples (row labels) and features
    (column labels) indexes as lists, and the converter's counts."""

    dataset: Dataset
    samples: List[str]
    features: List[str]
    stats: Dict[str, Any]


def _labels(index: Union[None, PathLike, Sequence[str]]) -> Optional[List[str]]:
    if index is None:
        return None
    if isinstance(index, (str, os.PathLike)):
        return _core.read_index(os.fspath(index))
    return [str(label) for label in index]


def convert(paths: Union[PathLike, Sequence[PathLike]], name: str = "data", *,
            format: str = "auto", analog: bool = False, min_rating: Optional[float] = None,
            ids: str = "default", features: Union[None, PathLike, Sequence[str]] = None,
            grow_features: Optional[bool] = None, drop_unknown: bool = False,
            samples: Union[None, PathLike, Sequence[str]] = None,
            grow_samples: bool = True) -> Converted:
    """Text interaction files -> a dataset, as ``sparsenet convert`` (docs/data-pipeline.md).

    ``format``: ``auto`` (from the name, then the first line), ``dsstne``
    (``sample<TAB>feature[,value]:...``), ``csv`` (MovieLens ratings.csv), ``tsv`` (u.data),
    ``dat`` (ratings.dat) or ``user-items`` (LightGCN splits: ``user item item ...``).
    A directory stands for its files in name order. ``analog`` keeps the values (ratings);
    ``min_rating`` keeps those >= it. ``ids``: ``default``, ``numeric`` or ``first-seen``.
    ``features`` / ``samples``: an existing index (a list of labels, or the path of an index
    file) to use: rows and columns then align with an earlier conversion. A given features
    index is frozen unless ``grow_features=True``; a feature outside it is an error, or
    dropped with ``drop_unknown=True``.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    feature_labels = _labels(features)
    if grow_features is None:
        grow_features = feature_labels is None
    native, sample_list, feature_list, stats = _core.convert_text(
        [os.fspath(p) for p in paths], name, format, analog, min_rating, ids, feature_labels,
        grow_features, drop_unknown, _labels(samples), grow_samples)
    return Converted(Dataset(native), sample_list, feature_list, stats)


def read_index(path: PathLike) -> List[str]:
    """A DSSTNE index file (``label<TAB>index`` lines): the labels by index."""
    return _core.read_index(os.fspath(path))


def write_index(path: PathLike, labels: Sequence[str]) -> None:
    """Writes labels as a DSSTNE index file (what ``sparsenet convert -f``/``-s`` write)."""
    _core.write_index(os.fspath(path), list(labels))


def evaluate(ids: np.ndarray, scores: np.ndarray, heldout: Any,
             k: Union[int, Sequence[int]] = 20, items: int = 0) -> Dict[str, float]:
    """Ranking metrics of top-K lists (``Network.predict``'s arrays) against held-out items
    (rows aligned), as ``sparsenet evaluate``: ``{'recall@20': ..., 'ndcg@20': ..., ...}``
    over the rows with at least one held-out item (docs/quality.md, "Metrics"). ``items``:
    the catalogue size for coverage (default: the held-out width)."""
    ks = [k] if isinstance(k, int) else list(k)
    ids = np.ascontiguousarray(ids, dtype=np.uint32)
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    return _core.evaluate_ranking(ids, scores, as_dataset(heldout, "heldout")._native, ks, items)


def write_recs(path: PathLike, ids: np.ndarray, scores: np.ndarray, *,
               sample_names: Optional[Sequence[str]] = None,
               feature_names: Optional[Sequence[str]] = None) -> None:
    """Writes top-K lists in ``sparsenet predict``'s recs format
    (``name<TAB>item,score:item,score...``, scores printed with ``%.6g``), which
    ``sparsenet evaluate --recs`` reads. Names default to row and column numbers."""
    _core.write_recs(os.fspath(path), np.ascontiguousarray(ids, dtype=np.uint32),
                     np.ascontiguousarray(scores, dtype=np.float32),
                     list(sample_names or []), list(feature_names or []))

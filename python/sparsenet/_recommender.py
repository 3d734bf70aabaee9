"""Recommender: the serving API (a model file, top-K queries from many threads at once)."""

from __future__ import annotations

import os
from typing import List, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _core
from ._dataset import PathLike
from ._errors import UsageError

Item = Union[str, int, tuple]  # a name, an id, or (name or id, weight)
Items = Union[Sequence[Item], dict]

_PRECISIONS = ("fp32", "tf32", "bf16")


def _check_options(precision: Optional[str], bf16_weights_only: bool, fp16_screening: bool,
                   bf16_input_weights: bool) -> None:
    """The arguments' values and combinations the library refuses, named in Python's terms."""
    if precision is not None and (not isinstance(precision, str)
                                  or precision.lower() not in _PRECISIONS):
        raise UsageError(f"Recommender: precision={precision!r} is unknown; expected 'fp32', "
                         "'tf32' or 'bf16' (or None: the model's Training Precision, else the "
                         "device's default)")
    for name, value in (("bf16_weights_only", bf16_weights_only),
                        ("bf16_input_weights", bf16_input_weights)):
        if not isinstance(value, bool):
            raise UsageError(f"Recommender: {name}={value!r}; expected True or False")
    if not bf16_weights_only:
        return
    if precision is not None and precision.lower() != "bf16":
        raise UsageError(f"Recommender: bf16_weights_only=True needs precision='bf16' (or "
                         f"precision=None with a model trained in bf16); got "
                         f"precision={precision!r}")
    if fp16_screening:
        raise UsageError("Recommender: bf16_weights_only=True and fp16_screening=True exclude "
                         "each other (the fp16 copy is made from the FP32 weights); pass one")


class Recommendations(NamedTuple):
    """One query's answer: ``ids`` (uint32) and ``scores`` (float32) best first (ties: lower id
    first), ``names`` from the features index (empty strings without one), ``unknown``: the
    items skipped because of ``ignore_unknown``, and ``logits``: the scores are a SoftMax
    layer's logits, not its probabilities (ranked by an ANN index or fp16 screening, which do
    not compute the normaliser; docs/serving.md, "SoftMax output layers")."""

    ids: np.ndarray
    scores: np.ndarray
    names: List[str]
    unknown: List[str]
    logits: bool = False


class Recommender:
    """``sparsenet::Recommender``: loads a model once and answers top-K queries. Thread-safe,
    and every call releases the GIL, so Python threads query it in parallel.

    ``features_index``: a DSSTNE index file to query and answer with item names. ``device``:
    ``auto`` (a GPU when the library has CUDA and one is present), ``cpu`` or ``cuda[:N]``.
    ``threads_per_call``, ``max_concurrent_calls``, ``max_batch``, ``fp16_screening``: see
    docs/library.md ("Serving").

    ``ann_index``: an ANN index file (:func:`build_ann_index`, ``sparsenet ann-index``; not a
    features index): queries take candidates from it and rank them exactly, filters honoured;
    ``ann_probe`` its accuracy knob (0: the file's), ``ann_fetch`` the candidates per query (0:
    max(k, efSearch)). An index built from another model raises :class:`sparsenet.DataError`
    naming the file. docs/serving.md ("ANN index").

    ``precision``: the matrix products' arithmetic, ``"fp32"``, ``"tf32"`` or ``"bf16"`` (as
    ``sparsenet serve --precision``; None: the model's Training Precision, else the device's
    default; docs/gpu.md "Precision"). ``bf16_weights_only``: with precision bf16, keep only the
    BF16 copies of the weights the products read (half their memory, the same answers; as
    ``--bf16-weights-only``); it excludes ``fp16_screening``. A value or a combination that is
    refused raises :class:`sparsenet.UsageError` naming the argument.
    ``bf16_input_weights``: keep the sparse input layer's weights in BF16 only (half their
    memory; scores those of the model with them rounded to BF16; CPU only; as
    ``--bf16-input-weights``).
    """

    def __init__(self, path: PathLike, *, features_index: Optional[PathLike] = None,
                 device: str = "auto", output_layer: Optional[str] = None,
                 threads_per_call: int = 1, max_concurrent_calls: int = 0,
                 max_batch: int = 256, fp16_screening: bool = False,
                 ann_index: Optional[PathLike] = None, ann_probe: int = 0, ann_fetch: int = 0,
                 precision: Optional[str] = None, bf16_weights_only: bool = False,
                 bf16_input_weights: bool = False):
        _check_options(precision, bf16_weights_only, fp16_screening, bf16_input_weights)
        try:
            self._native = _core.Recommender(
                os.fspath(path), os.fspath(features_index) if features_index else "", device,
                output_layer or "", threads_per_call, max_concurrent_calls, max_batch,
                fp16_screening, os.fspath(ann_index) if ann_index else "", ann_probe, ann_fetch,
                precision.lower() if precision else "", bf16_weights_only, bf16_input_weights)
        except UsageError as e:
            if bf16_weights_only and "needs precision bf16" in str(e):
                # precision=None and a model whose Training Precision is not bf16.
                raise UsageError(f"Recommender: bf16_weights_only=True needs precision='bf16' "
                                 f"(or a model trained in bf16): {e}") from e
            raise

    def recommend(self, items: Items, k: int = 10, *, exclude_inputs: bool = True,
                  allow: Optional[Items] = None, deny: Optional[Items] = None,
                  ignore_unknown: bool = False) -> Recommendations:
        """Top-``k`` for a user who has ``items``: names (str), ids (int), (item, weight) pairs
        or a {item: weight} dict. ``allow``: recommend only these; ``deny``: never these;
        ``exclude_inputs``: never the query's own items. An unknown item raises
        :class:`sparsenet.DataError` listing every one, unless ``ignore_unknown``."""
        return Recommendations(*self._native.recommend(items, k, exclude_inputs, allow, deny,
                                                       ignore_unknown))

    def recommend_batch(self, queries: Sequence[Items], k: int = 10, *,
                        exclude_inputs: bool = True, allow: Optional[Items] = None,
                        deny: Optional[Items] = None,
                        ignore_unknown: bool = False) -> List[Recommendations]:
        """One :class:`Recommendations` per query (shared forward passes of up to max_batch
        rows; each as :meth:`recommend` ranks it up to rounding)."""
        return [Recommendations(*r) for r in self._native.recommend_batch(
            queries, k, exclude_inputs, allow, deny, ignore_unknown)]

    input_items = property(lambda self: self._native.input_items,
                           doc="Width of the Input layer (valid query ids 0 .. n-1).")
    output_items = property(lambda self: self._native.output_items,
                            doc="Width of the ranked layer (valid result ids).")
    has_names = property(lambda self: self._native.has_names,
                         doc="Whether a features index was given.")
    ann = property(lambda self: self._native.ann,
                   doc="Whether queries are answered from an ANN index (ann_index).")
    ann_queries = property(lambda self: self._native.ann_queries,
                           doc="Queries answered from the ANN index so far.")
    ann_memory_bytes = property(lambda self: self._native.ann_memory_bytes,
                                doc="Bytes of the ANN index with its re-ranking vectors.")
    released_bytes = property(lambda self: self._native.released_bytes,
                              doc="Bytes of weights freed after loading (output matrix with "
                              "an ANN index, FP32 input weights with bf16_input_weights).")

    def id_of(self, name: str) -> int:
        return self._native.id_of(name)

    def name_of(self, item_id: int) -> str:
        return self._native.name_of(item_id)

    def __repr__(self) -> str:
        return f"Recommender({self.input_items} -> {self.output_items} items)"


def build_ann_index(model: PathLike, out: PathLike, *, kind: str = "ivf",
                    cells: int = 0, hnsw_m: int = 16, ef_construction: int = 80,
                    probe: int = 0, threads: int = 0,
                    output_layer: Optional[str] = None, vectors: str = "fp16") -> dict:
    """``sparsenet ann-index``: the ANN index of ``model``'s output layer into ``out``
    (kinds ivf, hnsw, flat; ``cells`` for ivf, 0: the power of 2 at or above 4 sqrt(items); ``vectors`` fp16, bf16
    or fp32: how the item vectors are stored, which also re-rank; docs/serving.md). Returns the
    build's report (kind, items, width, links, cells, probe, vectors, seconds, file_bytes,
    index_bytes, fingerprint)."""
    return _core.build_ann_index(os.fspath(model), os.fspath(out), kind, hnsw_m,
                                 ef_construction, probe, threads, output_layer or "", vectors,
                                 cells)


__all__ = ["Recommender", "Recommendations", "build_ann_index"]

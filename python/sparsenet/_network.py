"""Network: a DSSTNE-language network, trained and used for prediction as the CLI does."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._dataset import Dataset, PathLike, as_dataset
from ._errors import UsageError

ConfigLike = Union[PathLike, Mapping[str, Any]]
Inputs = Union[Any, Mapping[str, Any]]  # a matrix / Dataset, or {dataset or layer name: ...}


_PRECISIONS = ("fp32", "tf32", "bf16")


def _check_precision(value: Any) -> None:
    if not isinstance(value, str) or value.lower() not in _PRECISIONS:
        raise UsageError(f"precision {value!r} is unknown; expected fp32, tf32 or bf16")


def _read_config(config: ConfigLike) -> Tuple[str, str]:
    """(JSON text, source name for messages) of a path or a dict."""
    if isinstance(config, Mapping):
        return json.dumps(config), "<dict>"
    path = os.fspath(config)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except OSError as e:
        from ._errors import FileError

        raise FileError(f"{path}: cannot read the network config: {e.strerror}") from None


class _Tqdm:
    """A tqdm bar per epoch (batches, loss, examples/s), when tqdm is importable."""

    def __init__(self, epochs: int):
        from tqdm.auto import tqdm

        self._tqdm, self._epochs, self._bar = tqdm, epochs, None

    def batch(self, p: Dict[str, Any]) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=p["batches"], desc=f"epoch {p['epoch']}/{self._epochs}",
                                   unit="batch", leave=True)
        self._bar.update(p["batch"] - self._bar.n)
        self._bar.set_postfix(loss=f"{p['loss']:.6f}", refresh=False)

    def epoch(self, e: Dict[str, Any]) -> None:
        if self._bar is not None:
            v = e.get("validation")
            if v:
                first = next(k for k in v if "@" in k)
                self._bar.set_postfix(loss=f"{e['loss']:.6f}", **{first: f"{v[first]:.4f}"})
            self._bar.close()
        self._bar = None


def _progress(progress: Any, epochs: int):
    """(on_batch, on_epoch) for fit's ``progress`` argument."""
    if callable(progress):
        return progress, None
    if progress is False or progress is None:
        return None, None
    try:
        bar = _Tqdm(epochs)
    except ImportError:
        if progress is True:
            raise
        return None, None
    return bar.batch, bar.epoch


def _chain(*fs: Optional[Callable[[Dict[str, Any]], Any]]):
    fs = [f for f in fs if f is not None]
    if not fs:
        return None
    return lambda d: [f(d) for f in fs][-1]


class Network:
    """A network in DSSTNE's JSON language: its config and, once built, its weights on a
    backend (``device="auto"``: a GPU when the library was built with CUDA and one is present,
    else the CPU).

    ``Network.from_json(config)`` reads a config; the weights are created by the first
    :meth:`fit` (widths of ``"N": "auto"`` layers from the data, seed from ``fit``'s ``seed``
    or the config's Training section), exactly as ``sparsenet train`` creates them, so the same
    seed and threads give the same weights bit for bit. :meth:`load` reads a model file.
    """

    def __init__(self, *, _json: str, _source: str, device: str, threads: int,
                 seed: Optional[int], native: Optional["_core.Network"] = None):
        self._json, self._source = _json, _source
        canonical, self._layers, self._training = _core.parse_config(_json, _source)
        self.device_request, self.threads, self.seed = device, threads, seed
        self.precision_request: Optional[str] = None
        self._native = native

    # ---- construction ----
    @classmethod
    def from_json(cls, config: ConfigLike, *, device: str = "auto", threads: int = 0,
                  seed: Optional[int] = None,
                  widths: Optional[Mapping[str, int]] = None,
                  precision: Optional[str] = None) -> "Network":
        """A network from a config file path or a dict (the JSON document). The config is
        checked now (:class:`sparsenet.ConfigError` with the JSON path otherwise).

        ``threads``: CPU threads (0: all cores), as ``--threads``; ``seed``: the weights' seed
        (default: fit's seed, else the config's Training Seed, else 12134). ``widths``:
        {dataset name: columns} to create the weights now rather than at the first fit.
        ``precision``: the matrix products' arithmetic, ``"fp32"``, ``"tf32"`` or ``"bf16"``, as
        ``--precision`` (default: the config's Training Precision, else the device's default;
        docs/gpu.md "Precision").
        """
        text, source = _read_config(config)
        if precision is not None:
            _check_precision(precision)
        net = cls(_json=text, _source=source, device=device, threads=threads, seed=seed)
        net.precision_request = precision
        if widths is not None:
            net._build(dict(widths), seed if seed is not None else net._training["seed"], 0)
        return net

    @classmethod
    def load(cls, path: PathLike, *, device: str = "auto", threads: int = 0,
             precision: Optional[str] = None) -> "Network":
        """A model file written by :meth:`save` or ``sparsenet train``; ``precision`` as in
        :meth:`from_json` (the file's weights stay fp32 whatever it is)."""
        if precision is not None:
            _check_precision(precision)
        native = _core.Network.load(os.fspath(path), device, threads, precision or "")
        net = cls(_json=native.config_json(), _source=os.fspath(path), device=device,
                  threads=threads, seed=None, native=native)
        net.precision_request = precision
        return net

    def _build(self, widths: Dict[str, int], seed: int, batch: int) -> None:
        self._native = _core.Network.create(self._json, self._source, widths,
                                            self.device_request, self.threads, seed, batch,
                                            self.precision_request or "")
        self._layers = self._native.layers()

    @property
    def precision(self) -> Optional[str]:
        """The matrix products' arithmetic: ``"fp32"``, ``"tf32"`` or ``"bf16"`` (``None``
        before the weights exist and when none was asked for). Settable at any time between
        calls: fit and predict use it from their next product; weights stay fp32."""
        if self._native is not None:
            return self._native.precision
        return self.precision_request

    @precision.setter
    def precision(self, value: str) -> None:
        _check_precision(value)
        self.precision_request = value
        if self._native is not None:
            self._native.precision = value

    @property
    def built(self) -> bool:
        """Whether the weights exist (after the first fit, from_json(widths=...) or load)."""
        return self._native is not None

    def _net(self) -> "_core.Network":
        if self._native is None:
            raise UsageError("the network has no weights yet: call fit() first (or create it "
                             "with Network.from_json(..., widths={dataset: columns}))")
        return self._native

    def save(self, path: PathLike) -> None:
        """Writes config + weights to a netCDF model file, atomically (``sparsenet predict``
        and :class:`Recommender` read it)."""
        self._net().save(os.fspath(path))

    # ---- description ----
    @property
    def config(self) -> Dict[str, Any]:
        """The canonical config (every key explicit; "auto" widths resolved once built)."""
        text = self._native.config_json() if self._native else _core.parse_config(
            self._json, self._source)[0]
        return json.loads(text)

    @property
    def layers(self) -> List[Dict[str, Any]]:
        """[{name, kind, dataset, n}] in config order (n None for "auto" before building)."""
        return [dict(layer) for layer in self._layers]

    @property
    def device(self) -> str:
        """The backend in use, e.g. ``cpu`` or ``cuda:0``."""
        return self._net().device

    def _datasets_of(self, kind: str) -> List[str]:
        return [layer["dataset"] for layer in self._layers if layer["kind"] == kind]

    def parameters(self) -> Dict[str, Tuple[int, int]]:
        """{name: (rows, cols)}: ``weight:<source>-><layer>`` ([in, out]) and ``bias:<layer>``."""
        return {name: (rows, cols) for name, rows, cols in self._net().parameters()}

    def get_parameter(self, name: str) -> np.ndarray:
        """A parameter as a float32 array (rows, cols): the library's host copy, not copied
        again."""
        return self._net().get_parameter(name)

    def set_parameter(self, name: str, values: np.ndarray) -> None:
        self._net().set_parameter(name, np.ascontiguousarray(values, dtype=np.float32))

    # ---- data ----
    def _bind(self, data: Inputs, names: List[str], what: str,
              cache: Dict[int, Dataset]) -> Dict[str, Dataset]:
        """{dataset name: Dataset} for the layers' datasets `names`, from one matrix (a
        single-dataset role) or a dict keyed by dataset or layer name."""
        def convert(x: Any, name: str) -> Dataset:
            if id(x) not in cache:
                cache[id(x)] = as_dataset(x, name)
            return cache[id(x)]

        if isinstance(data, Mapping):
            by_layer = {layer["name"]: layer["dataset"] for layer in self._layers}
            out = {}
            for key, x in data.items():
                name = key if key in names else by_layer.get(key)
                if name not in names:
                    raise UsageError(f"{what}: '{key}' is neither a dataset nor a layer of "
                                     f"{what}; expected one of {names}")
                out[name] = convert(x, name)
            return out
        if len(set(names)) != 1:
            raise UsageError(f"{what}: the network has datasets {names}; pass a dict "
                             "{dataset name: matrix}")
        return {names[0]: convert(data, names[0])}

    # ---- training ----
    def fit(self, train_inputs: Inputs, train_targets: Optional[Inputs] = None, *,
            epochs: Optional[int] = None, batch: Optional[int] = None,
            optimizer: Optional[str] = None, learning_rate: Optional[float] = None,
            mu: Optional[float] = None, mu1: Optional[float] = None,
            l2: Optional[float] = None, l1: Optional[float] = None,
            epsilon: Optional[float] = None, decay: Optional[float] = None,
            sparse_updates: Optional[str] = None, seed: Optional[int] = None,
            shuffle: Optional[bool] = None,
            validation: Optional[Tuple[Any, Any]] = None,
            validate_k: Union[int, Sequence[int]] = 20, keep_best: Optional[str] = None,
            patience: Optional[int] = None, progress: Any = "auto",
            on_epoch: Optional[Callable[[Dict[str, Any]], Any]] = None,
            early_stop: Optional[Callable[[Dict[str, Any]], bool]] = None) -> List[Dict[str, Any]]:
        """Trains, as ``sparsenet train`` does with the same options; returns one dict per
        epoch (epoch, loss, examples, seconds, examples_per_second, batches, complete, and
        ``validation`` metrics when validating).

        ``train_inputs``: the Input layer's matrix (scipy.sparse, numpy or Dataset), or a dict
        {dataset or layer name: matrix}; ``train_targets`` likewise for the Output layers
        (default: the inputs, for an autoencoder; the same object is converted once).
        Every option left None comes from the config's Training section (or Decay), else the
        CLI's default, exactly as the flags of ``sparsenet train`` override it: ``epochs``
        (-e), ``batch`` (-b), ``optimizer`` (sgd | momentum | nesterov | adagrad | rmsprop |
        adadelta | adam | adamw), ``learning_rate`` (-alpha), ``mu``, ``mu1``, ``l2``
        (-lambda), ``l1`` (-lambda1), ``epsilon``, ``decay``, ``sparse_updates`` (exact |
        lazy), ``seed``, ``shuffle`` (False = --no-shuffle).

        ``validation=(inputs, heldout)``: after every epoch every item is ranked for these rows
        (their input items excluded) and scored against the held-out items at ``validate_k``
        (``--validate-input/--validate-target/--validate-k``). ``keep_best="recall@20"``:
        the network ends with the weights of the best validation epoch (``--keep-best``).
        ``patience=N`` (with keep_best): stop after N epochs without a new best.
        ``early_stop(epoch_dict) -> bool``: stop after that epoch when True.

        ``progress``: "auto" (a tqdm bar when tqdm is importable), True, False, or a callable
        called after every batch with {epoch, batch, batches, examples, loss, seconds}.
        ``on_epoch(epoch_dict)``: after every complete epoch.

        The GIL is released while training runs (callbacks take it back): other Python threads
        run, and :meth:`cancel` from another thread stops training after the batch in
        progress; Ctrl-C does the same and raises KeyboardInterrupt. An exception in a
        callback stops training and is raised here.
        """
        cache: Dict[int, Dataset] = {}
        datasets = self._bind(train_inputs, self._datasets_of("Input"), "train_inputs", cache)
        targets = train_inputs if train_targets is None else train_targets
        datasets.update(self._bind(targets, self._datasets_of("Output"), "train_targets", cache))
        options = dict(epochs=epochs, batch=batch, optimizer=optimizer,
                       learning_rate=learning_rate, mu=mu, mu1=mu1, l2=l2, l1=l1,
                       epsilon=epsilon, decay=decay, sparse_updates=sparse_updates, seed=seed,
                       shuffle=shuffle)
        if self._native is None:  # as sparsenet train: widths from the data, the run's seed
            widths = {name: d.cols for name, d in datasets.items()}
            weight_seed = self.seed if self.seed is not None else (
                seed if seed is not None else self._training["seed"])
            self._build(widths, weight_seed, batch or self._training["batch"])
        val_in = val_target = None
        if validation is not None:
            inputs, heldout = validation
            val_in = as_dataset(inputs, "validation_input")._native
            val_target = as_dataset(heldout, "validation_target")._native
        best = None
        if keep_best is not None:
            metric, _, k = keep_best.partition("@")
            if not k.isdigit():
                raise UsageError(f"keep_best '{keep_best}': expected METRIC@K, e.g. recall@20")
            best = (metric.lower(), int(k))
        ks = [validate_k] if isinstance(validate_k, int) else list(validate_k)
        total = epochs if epochs is not None else self._training["epochs"]
        on_batch, bar_epoch = _progress(progress, total)
        return self._native.fit(
            {name: d._native for name, d in datasets.items()}, options, on_batch,
            _chain(bar_epoch, on_epoch), early_stop, val_in, val_target, ks, best,
            int(patience or 0))

    def cancel(self) -> bool:
        """Stops a running :meth:`fit` (from another thread) after the batch in progress; the
        network stays consistent. False when no fit is running."""
        return self._native.cancel() if self._native is not None else False

    # ---- prediction ----
    def predict(self, inputs: Inputs, k: int = 100, *, exclude: Any = "inputs",
                batch: int = 1024, output_layer: Optional[str] = None
                ) -> Tuple[np.ndarray, np.ndarray]:
        """Top-K items per row, as ``sparsenet predict``: ``(ids, scores)``, arrays of shape
        (rows, k), uint32 and float32, best first, filled by the library (not copied).
        Unused slots (fewer than k items left) hold id 2**32-1 and score -inf.

        ``exclude``: ``"inputs"`` (default) never returns a row's own input items; ``None``
        excludes nothing (``--keep-input``); a matrix (rows aligned) excludes its items
        instead (pass ``inputs + other`` for both). ``output_layer``: the layer to rank
        (default: the first Output layer).
        """
        cache: Dict[int, Dataset] = {}
        datasets = self._bind(inputs, self._datasets_of("Input"), "inputs", cache)
        exclude_inputs = isinstance(exclude, str) and exclude == "inputs"
        if isinstance(exclude, str) and not exclude_inputs:
            raise UsageError(f"exclude '{exclude}': expected 'inputs', None or a matrix")
        excluded = None
        if exclude is not None and not exclude_inputs:
            excluded = as_dataset(exclude, "exclude")._native
        return self._net().predict({n: d._native for n, d in datasets.items()}, k, batch,
                                   output_layer or "", excluded, exclude_inputs)

    def scores(self, inputs: Inputs, output_layer: Optional[str] = None) -> np.ndarray:
        """Dense activations of ``output_layer`` (default: the first Output layer) for every
        row: float32 (rows, units)."""
        cache: Dict[int, Dataset] = {}
        datasets = self._bind(inputs, self._datasets_of("Input"), "inputs", cache)
        return self._net().scores({n: d._native for n, d in datasets.items()}, output_layer or "")

    def __repr__(self) -> str:
        state = f"device={self._native.device!r}" if self._native else "not built"
        sizes = " -> ".join(str(layer["n"] or "auto") for layer in self._layers)
        return f"Network({sizes}, {state})"

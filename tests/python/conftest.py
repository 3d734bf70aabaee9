"""Fixtures of the Python tests (tests/python/run.sh runs them against the build tree's package,
<build>/python, with SPARSENET_CLI naming the same build's `sparsenet`)."""

import contextlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import sparsenet

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("SPARSENET_CLI", ROOT / "build" / "sparsenet"))
SHARED_DATA = Path(os.environ.get("SPARSENET_SHARED_DATA", ROOT.parent / "shared" / "data"))

# A small autoencoder (configs/autoencoder.json's shape, a smaller hidden layer).
AUTOENCODER = {
    "Version": 0.9, "Name": "test autoencoder", "Kind": "AutoEncoder", "ShuffleIndices": True,
    "Denoising": {"p": 0.2},
    "ScaledMarginalCrossEntropy": {"oneTarget": 0.9, "zeroTarget": 0.1, "oneScale": 1.0,
                                   "zeroScale": 1.0},
    "Layers": [
        {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "gl_input", "Sparse": True},
        {"Name": "Hidden", "Kind": "Hidden", "Type": "FullyConnected", "N": 32,
         "Activation": "Tanh", "WeightInit": {"Scheme": "Xavier", "Scale": 1.0}},
        {"Name": "Output", "Kind": "Output", "Type": "FullyConnected", "N": "auto",
         "DataSet": "gl_output", "Activation": "Sigmoid", "Sparse": True,
         "WeightInit": {"Scheme": "Xavier", "Scale": 1.0, "Bias": -4.0}},
    ],
    "ErrorFunction": "ScaledMarginalCrossEntropy",
    "Training": {"Optimizer": "Adam", "Alpha": 0.002, "BatchSize": 128, "Epochs": 2},
}


def run_cli(*args):
    """Runs the build's `sparsenet` and returns its stdout; fails the test on a non-zero exit."""
    r = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"sparsenet {' '.join(map(str, args))}: {r.stderr}"
    return r.stdout


def train_small_model(data, config_file, path):
    """One epoch of the test autoencoder on the shared train split, by the CLI: `path`."""
    run_cli("train", "-c", config_file, "-i", data / "train.nc", "-n", path, "-e", 1,
            "--seed", 5, "--threads", 2, "--device", "cpu", "-q")
    return path


@contextlib.contextmanager
def serving(model, log, *flags):
    """`sparsenet serve -n model --port 0 --threads 2 flags...` until /health answers 200: its
    URL; stopped with SIGTERM after, which must end it with exit 0."""
    with open(log, "w") as err:
        proc = subprocess.Popen([str(CLI), "serve", "-n", str(model), "--port", "0",
                                 "--threads", "2", *map(str, flags)], stderr=err)
    try:
        url = None
        for _ in range(300):
            text = log.read_text()
            if "listening on http://" in text:
                port = text.split("listening on http://127.0.0.1:")[1].split()[0]
                url = f"http://127.0.0.1:{port}"
                try:
                    with urllib.request.urlopen(url + "/health") as r:
                        if r.status == 200:
                            break
                except urllib.error.URLError:
                    pass
            if proc.poll() is not None:
                pytest.fail(f"serve exited: {log.read_text()}")
            time.sleep(0.1)
        else:
            pytest.fail(f"serve did not start: {log.read_text()}")
        yield url
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """Synthetic interactions written by `sparsenet generate`: train.nc (gl_input and
    gl_output, 1500 users x 400 items) and heldout.nc (20 % of each user's items)."""
    if not CLI.exists():
        pytest.fail(f"{CLI} not found: build first (make build) or set SPARSENET_CLI")
    d = tmp_path_factory.mktemp("data")
    run_cli("generate", "-o", d / "train.nc", "--users", 1500, "--items", 400, "--nnz", 30000,
            "--holdout", 0.2, "--heldout-output", d / "heldout.nc", "--seed", 3, "-q")
    return d


@pytest.fixture(scope="session")
def config_file(tmp_path_factory):
    import json

    path = tmp_path_factory.mktemp("config") / "autoencoder.json"
    path.write_text(json.dumps(AUTOENCODER, indent=2))
    return path


@pytest.fixture(scope="session")
def train(data):
    return sparsenet.Dataset.load(data / "train.nc", "gl_input")


@pytest.fixture(scope="session")
def heldout(data):
    return sparsenet.Dataset.load(data / "heldout.nc")

"""`sparsenet predict --output-format npz` read back by numpy and the package: the same arrays as
Network.predict, and the same lists as the recs text the CLI writes (byte for byte)."""

import numpy as np
import pytest

import sparsenet
from conftest import run_cli

THREADS = 2


@pytest.fixture(scope="module")
def model(data, config_file, tmp_path_factory):
    path = tmp_path_factory.mktemp("predict") / "model.nc"
    run_cli("train", "-c", config_file, "-i", data / "train.nc", "-n", path, "-e", 2,
            "--seed", 4, "--threads", THREADS, "--device", "cpu", "-q")
    return path


def predict(model, data, out, *extra):
    run_cli("predict", "-n", model, "--input", data / "train.nc", "-k", 30, "-s", out,
            "--threads", THREADS, "--device", "cpu", *extra)


def test_npz_holds_the_packages_predictions(model, data, train, tmp_path):
    predict(model, data, tmp_path / "recs.npz", "--output-format", "npz")
    with np.load(tmp_path / "recs.npz") as z:  # no pickle: plain arrays
        assert sorted(z.files) == ["items", "scores", "users"]
        users, items, scores = z["users"], z["items"], z["scores"]
    assert users.dtype == np.int64 and np.array_equal(users, np.arange(train.rows))
    assert items.dtype == np.uint32 and items.shape == (train.rows, 30)
    assert scores.dtype == np.float32 and scores.shape == (train.rows, 30)
    net = sparsenet.Network.load(model, device="cpu", threads=THREADS)
    ids, want = net.predict(train, k=30)
    assert np.array_equal(items, ids)
    assert np.array_equal(scores, want)  # bit for bit: float32 stored as computed

    # The text the CLI writes is these scores with %.6g, as the package's write_recs and
    # Python's own printf-style formatting write them.
    predict(model, data, tmp_path / "recs.txt")
    text = (tmp_path / "recs.txt").read_bytes()
    sparsenet.write_recs(tmp_path / "py.recs", items, scores)
    assert (tmp_path / "py.recs").read_bytes() == text
    lines = []
    for r in range(train.rows):
        used = items[r] != np.iinfo(np.uint32).max
        entries = ":".join(f"{i},{'%.6g' % float(s)}" for i, s in zip(items[r][used], scores[r][used]))
        lines.append(f"{r}\t{entries}\n")
    assert "".join(lines).encode() == text


def test_npz_carries_the_names(model, data, train, tmp_path):
    users = [f"user-{r}-é" for r in range(train.rows)]
    items = [f"item {c}" for c in range(train.cols)]
    sparsenet.write_index(tmp_path / "users.idx", users)
    sparsenet.write_index(tmp_path / "items.idx", items)
    predict(model, data, tmp_path / "named.npz", "--output-format", "npz", "--samples-index",
            tmp_path / "users.idx", "-o", tmp_path / "items.idx")
    with np.load(tmp_path / "named.npz") as z:
        assert z["user_names"].dtype.kind == "U" and z["item_names"].dtype.kind == "U"
        assert z["user_names"].tolist() == users
        assert z["item_names"].tolist() == items
        ids = z["items"]
    # The text output names the same users and items.
    predict(model, data, tmp_path / "named.txt", "--samples-index", tmp_path / "users.idx",
            "-o", tmp_path / "items.idx")
    first = (tmp_path / "named.txt").read_text().splitlines()[0]
    name, entries = first.split("\t")
    assert name == users[0]
    assert [e.rsplit(",", 1)[0] for e in entries.split(":")] == [items[i] for i in ids[0]]


def test_output_format_errors(model, data, tmp_path):
    import subprocess
    from conftest import CLI

    def fails(*args):
        r = subprocess.run([str(CLI), "predict", "-n", str(model), "--input",
                            str(data / "train.nc"), *map(str, args)], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        return r.stderr

    err = fails("--output-format", "parquet", "-s", tmp_path / "x")
    assert "--output-format" in err and "'parquet'" in err and "text or npz" in err
    assert "-s FILE" in fails("--output-format", "npz")
    assert "option -p" in fails("--output-format", "npz", "-s", tmp_path / "x.npz", "-p", ".3f")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.npz").exists()


def test_timings_name_every_phase_in_order(model, data, tmp_path):
    import re
    import subprocess
    from conftest import CLI

    r = subprocess.run([str(CLI), "predict", "-n", str(model), "--input", str(data / "train.nc"),
                        "-k", "10", "-s", str(tmp_path / "r.txt"), "--threads", str(THREADS),
                        "--device", "cpu", "--timings"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    phases = re.findall(r"^predict: (\w+) (\d+\.\d{3}) s$", r.stderr, re.M)
    # load's parts first (load_device only on a GPU), each on its own clock: they run at once.
    assert [p for p, _ in phases] == ["load_data", "load_model", "load", "score", "top_k", "write",
                                      "sync", "total"]
    seconds = {p: float(s) for p, s in phases}
    assert seconds["load"] >= max(seconds["load_data"], seconds["load_model"]) - 0.001
    parts = (seconds["load"] + seconds["score"] + seconds["top_k"] + seconds["write"] +
             seconds["sync"])
    assert seconds["total"] >= parts - 0.005  # each printed rounded to the millisecond

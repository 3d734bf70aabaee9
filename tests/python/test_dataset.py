"""scipy <-> Dataset <-> netCDF round trips, views, conversion of text, bad input."""

import numpy as np
import pytest
import scipy.sparse as sp

import sparsenet
from conftest import run_cli


def random_csr(rows, cols, density, seed, boolean):
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32)
    if boolean:
        m.data[:] = 1.0
    return m


@pytest.mark.parametrize("boolean", [True, False])
def test_scipy_round_trip(boolean):
    m = random_csr(300, 77, 0.05, 1, boolean)
    d = sparsenet.Dataset.from_scipy(m, "x")
    assert d.shape == (300, 77) and d.nnz == m.nnz and d.name == "x"
    assert d.is_boolean == boolean
    assert (d.data is None) == boolean
    back = d.to_scipy()
    assert back.shape == m.shape and back.dtype == np.float32
    np.testing.assert_array_equal(back.indptr, m.indptr)
    np.testing.assert_array_equal(back.indices, m.indices)
    np.testing.assert_array_equal(back.data, m.data)


def test_views_are_the_library_buffers():
    m = random_csr(50, 20, 0.2, 2, False)
    d = sparsenet.Dataset.from_scipy(m)
    a, b = d.indices, d.indices
    assert a.dtype == np.uint32 and d.indptr.dtype == np.uint64 and d.data.dtype == np.float32
    assert np.shares_memory(a, b)  # both views of the same buffer: no copy per access
    assert not a.flags.writeable and not d.indptr.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1
    del d  # the views keep the dataset alive
    np.testing.assert_array_equal(b, m.indices)


def test_canonicalises_coo_duplicates_and_unsorted_rows():
    rows = np.array([0, 0, 1, 1, 1])
    cols = np.array([5, 2, 3, 3, 0])
    vals = np.array([1.0, 2.0, 1.5, 2.5, 4.0])
    d = sparsenet.Dataset.from_scipy(sp.coo_array((vals, (rows, cols)), shape=(3, 6)))
    np.testing.assert_array_equal(d.indptr, [0, 2, 4, 4])
    np.testing.assert_array_equal(d.indices, [2, 5, 0, 3])
    np.testing.assert_array_equal(d.data, [2.0, 1.0, 4.0, 4.0])
    dense = np.array([[0, 1, 0], [1, 1, 0]])
    np.testing.assert_array_equal(sparsenet.Dataset.from_scipy(dense).to_scipy().toarray(), dense)


def test_netcdf_round_trip_and_cli_reads_it(tmp_path):
    m = random_csr(200, 64, 0.1, 3, False)
    w = np.linspace(0.5, 2.0, 200)
    d = sparsenet.Dataset.from_scipy(m, "ratings", weights=w)
    d.save(tmp_path / "r.nc")
    back = sparsenet.Dataset.load(tmp_path / "r.nc")
    assert back.name == "ratings" and back.shape == d.shape
    np.testing.assert_array_equal(back.indptr, d.indptr)
    np.testing.assert_array_equal(back.indices, d.indices)
    np.testing.assert_array_equal(back.data, d.data)
    np.testing.assert_array_equal(back.weights, w.astype(np.float32))
    b = sparsenet.Dataset.from_scipy(m, "flags", boolean=True)
    sparsenet.write_datasets(tmp_path / "two.nc", [d, b])
    assert sparsenet.Dataset.names(tmp_path / "two.nc") == ["ratings", "flags"]
    both = sparsenet.Dataset.load_all(tmp_path / "two.nc")
    assert both["flags"].is_boolean and both["flags"].nnz == m.nnz
    info = run_cli("info", tmp_path / "two.nc")
    assert "ratings" in info and "flags" in info


def test_convert_formats(tmp_path):
    (tmp_path / "d.txt").write_text("u1\ta,2:b,3\nu2\tc,1\nu3\ta,1:c,1\n")
    c = sparsenet.convert(tmp_path / "d.txt", "x", format="dsstne", analog=True)
    assert c.samples == ["u1", "u2", "u3"] and c.features == ["a", "b", "c"]
    np.testing.assert_array_equal(c.dataset.to_scipy().toarray(),
                                  [[2, 3, 0], [0, 0, 1], [1, 0, 1]])
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,10,4.0,1\n"
                                          "1,20,2.0,2\n2,20,5.0,3\n")
    r = sparsenet.convert(tmp_path / "ratings.csv", "r", min_rating=3.0)
    assert r.stats["format"] == "csv" and r.stats["below_min_rating"] == 1
    assert r.dataset.nnz == 2 and r.dataset.is_boolean
    (tmp_path / "train.txt").write_text("0 1 2\n1 0\n")
    (tmp_path / "test.txt").write_text("0 0\n1 2\n")
    tr = sparsenet.convert(tmp_path / "train.txt", "train")
    te = sparsenet.convert(tmp_path / "test.txt", "test", features=tr.features,
                           samples=tr.samples)
    assert te.dataset.shape == (2, 3) and te.dataset.to_scipy()[1, 2] == 1
    sparsenet.write_index(tmp_path / "f.index", tr.features)
    assert sparsenet.read_index(tmp_path / "f.index") == tr.features
    # The same conversion as `sparsenet convert`: identical datasets.
    run_cli("convert", "-i", tmp_path / "d.txt", "-o", tmp_path / "d.nc", "-d", "x",
            "-f", tmp_path / "feat.index", "-c", "-s", tmp_path / "samp.index", "-t", "analog",
            "-q")
    cli = sparsenet.Dataset.load(tmp_path / "d.nc")
    np.testing.assert_array_equal(cli.indices, c.dataset.indices)
    np.testing.assert_array_equal(cli.data, c.dataset.data)


def test_bad_input_raises_with_the_library_message(tmp_path):
    with pytest.raises(sparsenet.DataError, match="indices"):
        sparsenet.Dataset.from_scipy(sp.csr_array((np.ones(1), np.array([-1]),
                                                   np.array([0, 1])), shape=(1, 3)))
    with pytest.raises(sparsenet.DataError, match="2-D"):
        sparsenet.Dataset.from_scipy(np.ones(3))
    with pytest.raises(sparsenet.FileError, match="missing.nc"):
        sparsenet.Dataset.load(tmp_path / "missing.nc")
    (tmp_path / "bad.txt").write_text("u1\ta:a\n")
    with pytest.raises(sparsenet.DataError, match="bad.txt"):
        sparsenet.convert(tmp_path / "bad.txt", format="dsstne")
    with pytest.raises(sparsenet.UsageError, match="format"):
        sparsenet.convert(tmp_path / "bad.txt", format="xml")
    with pytest.raises(ValueError):  # every DataError is a ValueError too
        sparsenet.Dataset.from_scipy(np.ones((2, 2)), weights=[1.0])

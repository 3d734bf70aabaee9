#!/usr/bin/env python3
"""Peer for the conversion benchmark: what a Python user would write instead of
`sparsenet convert` -- pandas.read_csv, factorize ids in first-seen order, build a CSR matrix
with scipy, write the same netCDF layout with netCDF4 (deflate 1 + shuffle, 1M chunks).

usage: pandas_convert.py RATINGS.csv OUT.nc
"""
import sys

import netCDF4
import numpy as np
import pandas as pd
import scipy.sparse as sp


def main():
    src, out = sys.argv[1], sys.argv[2]
    df = pd.read_csv(src, usecols=[0, 1], dtype={0: np.int64, 1: np.int64}, engine="c")
    users, user_labels = pd.factorize(df.iloc[:, 0])
    items, item_labels = pd.factorize(df.iloc[:, 1])
    m = sp.csr_matrix((np.ones(len(df), dtype=np.float32), (users, items)),
                      shape=(len(user_labels), len(item_labels)))
    m.sort_indices()
    with netCDF4.Dataset(out, "w", format="NETCDF4") as nc:
        nc.setncattr_string("name0", "gl_input")
        nc.datasets = np.uint32(1)
        nc.attributes0 = np.uint32(3)
        nc.width0 = np.uint32(m.shape[1])
        nc.createDimension("examplesDim0", m.shape[0])
        nc.createDimension("sparseDataDim0", m.nnz)
        for name, dim, data, dtype in (
            ("sparseStart0", "examplesDim0", m.indptr[:-1], "u8"),
            ("sparseEnd0", "examplesDim0", m.indptr[1:], "u8"),
            ("sparseIndex0", "sparseDataDim0", m.indices, "u4"),
        ):
            v = nc.createVariable(name, dtype, (dim,), zlib=True, complevel=1, shuffle=True,
                                  chunksizes=(min(len(data), 1 << 20),))
            v[:] = data
    print(f"{m.shape[0]} x {m.shape[1]}, {m.nnz} nonzeros")


if __name__ == "__main__":
    main()

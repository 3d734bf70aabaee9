// Split networks shared by the tests under mpirun (tests/mpi/mpi_*_test.cpp): the world's rank
// and size, two configs whose bands and blocks are uneven at 2 and 3 ranks, and generated data.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>

#include "sparsenet/dataset.h"

namespace sparsenet::mpi_testing {

inline int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
inline int world_size() {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// Mult-DAE shape: SoftMax output with multinomial cross-entropy (the split SoftMax path), input
// rows normalised (each rank's band scaled by the whole row's norm).
inline const char* const kSoftmax = R"({
  "Version": 0.9, "Name": "dae", "Kind": "AutoEncoder",
  "Denoising": {"p": 0.5},
  "ErrorFunction": "CrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true,
     "Normalize": {"Norm": "L2", "Scale": 3}},
    {"Name": "Hidden", "Kind": "Hidden", "N": 41, "Activation": "Tanh"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "SoftMax"}
  ]})";

// A deep network with both splits on dense edges (Hidden1 -> Hidden2 by output columns,
// Hidden3 -> Hidden4 by input rows), a Skip, a sparseness penalty, DeltaNorm on a split row,
// WeightNorm on a matrix split by output columns, dropout.
inline const char* const kDeep = R"({
  "Version": 0.9, "Name": "deep", "Kind": "FeedForward",
  "ErrorFunction": "CrossEntropy",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden1", "Kind": "Hidden", "N": 23, "Activation": "RectifiedLinear"},
    {"Name": "Hidden2", "Kind": "Hidden", "N": 61, "Activation": "Tanh", "Source": "Hidden1",
     "WeightNorm": 0.8, "pDropout": 0.2},
    {"Name": "Hidden3", "Kind": "Hidden", "N": 61, "Activation": "Sigmoid", "Source": "Hidden2",
     "Skip": ["Hidden2"], "Sparse": true, "SparsenessPenalty": {"p": 0.3, "beta": 0.5}, "DeltaNorm": 0.05},
    {"Name": "Hidden4", "Kind": "Hidden", "N": 19, "Activation": "Tanh", "Source": "Hidden3"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid",
     "Source": "Hidden4"}
  ]})";

// Generated interactions (planted factors) as both the input and the target dataset.
struct Data {
    Dataset in, out;
    Data(uint64_t users, uint32_t items, uint64_t nnz, uint64_t seed = 11) {
        GenerateOptions g;
        g.users = users;
        g.items = items;
        g.nnz = nnz;
        g.factors = 6;
        g.seed = seed;
        in = generate(g).train;
        out = in;
        in.name = "in";
        out.name = "out";
    }
    std::map<std::string, const Dataset*> all() const { return {{"in", &in}, {"out", &out}}; }
    std::map<std::string, uint32_t> widths() const { return {{"in", in.cols}, {"out", out.cols}}; }
};

}  // namespace sparsenet::mpi_testing

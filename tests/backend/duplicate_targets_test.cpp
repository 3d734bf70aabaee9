// A target row holding a column twice: output_delta overwrites the delta at each stored target
// (so the CPU kept the last entry's delta and counted the loss twice, and on a GPU two threads
// raced on it). The behaviour is now defined: such rows are refused everywhere, with the file,
// dataset, row and column named: by the netCDF reader (the converter merges repeated
// interactions, so its files never hold one), by the trainer for datasets built in memory, and by
// the op itself (Error(kInternal), nothing written). On a GPU, cuda_defects_test checks that the
// device reports the same row (CudaDefects.OutputDeltaReportsARepeatedTargetColumn).
#include <gtest/gtest.h>
#include <netcdf.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/op_test_util.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/trainer.h"
#include "support/netcdf_test_util.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::contains;
using testing::expect_error;

using testing::nc_ok;

// A DSSTNE-layout file with two boolean sparse datasets of 3 rows and width 10, written with the
// netCDF library directly (the writer refuses repeated columns): "in" is valid, "out" stores
// column 7 twice in row 1.
void write_file_with_duplicate(const std::string& path) {
    int nc;
    nc_ok(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
    const unsigned count = 2;
    nc_ok(nc_put_att_uint(nc, NC_GLOBAL, "datasets", NC_UINT, 1, &count));
    const std::vector<std::string> names = {"in", "out"};
    const std::vector<std::vector<unsigned>> starts = {{0, 2, 3}, {0, 1, 4}};
    const std::vector<std::vector<unsigned>> ends = {{2, 3, 5}, {1, 4, 5}};
    const std::vector<std::vector<unsigned>> indices = {{1, 4, 2, 0, 9}, {3, 2, 7, 7, 5}};
    int ids[2][3];
    for (int n = 0; n < 2; ++n) {
        const std::string s = std::to_string(n);
        const unsigned attributes = 3, zero = 0, one = 1, width = 10;
        nc_ok(nc_put_att_text(nc, NC_GLOBAL, ("name" + s).c_str(), names[n].size(),
                              names[n].c_str()));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("attributes" + s).c_str(), NC_UINT, 1, &attributes));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("kind" + s).c_str(), NC_UINT, 1, &zero));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("dataType" + s).c_str(), NC_UINT, 1, &zero));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("dimensions" + s).c_str(), NC_UINT, 1, &one));
        nc_ok(nc_put_att_uint(nc, NC_GLOBAL, ("width" + s).c_str(), NC_UINT, 1, &width));
        int examples_dim, data_dim;
        nc_ok(nc_def_dim(nc, ("examplesDim" + s).c_str(), 3, &examples_dim));
        nc_ok(nc_def_dim(nc, ("sparseDataDim" + s).c_str(), 5, &data_dim));
        nc_ok(nc_def_var(nc, ("sparseStart" + s).c_str(), NC_UINT, 1, &examples_dim, &ids[n][0]));
        nc_ok(nc_def_var(nc, ("sparseEnd" + s).c_str(), NC_UINT, 1, &examples_dim, &ids[n][1]));
        nc_ok(nc_def_var(nc, ("sparseIndex" + s).c_str(), NC_UINT, 1, &data_dim, &ids[n][2]));
    }
    nc_ok(nc_enddef(nc));
    for (int n = 0; n < 2; ++n) {
        nc_ok(nc_put_var_uint(nc, ids[n][0], starts[n].data()));
        nc_ok(nc_put_var_uint(nc, ids[n][1], ends[n].data()));
        nc_ok(nc_put_var_uint(nc, ids[n][2], indices[n].data()));
    }
    nc_ok(nc_close(nc));
}

TEST(DuplicateTargets, TheReaderNamesFileDatasetRowAndColumn) {
    testing::TempDir dir;
    const std::string path = dir.file("dup.nc");
    write_file_with_duplicate(path);
    if (HasFatalFailure()) return;
    EXPECT_EQ(Dataset::read(path, "in").nnz(), 5u);  // the valid dataset of the file reads
    for (const auto& read : std::vector<std::function<void()>>{
             [&] { Dataset::read(path, "out"); }, [&] { read_datasets(path); },
             [&] { Dataset::read_columns(path, "out", 0, 10); }}) {
        const std::string msg = expect_error(read, ErrorCategory::kData);
        EXPECT_TRUE(contains(msg, path)) << msg;
        EXPECT_TRUE(contains(msg, "dataset out")) << msg;
        EXPECT_TRUE(contains(msg, "row 1")) << msg;
        EXPECT_TRUE(contains(msg, "duplicate column 7")) << msg;
    }
}

const char* kNet = R"({"Kind": "FeedForward", "Name": "dup",
  "Layers": [
    {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
    {"Name": "Hidden", "Kind": "Hidden", "N": 4, "Activation": "Sigmoid"},
    {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out", "Activation": "Sigmoid"}
  ]})";

Dataset csr(const std::string& name, std::vector<uint64_t> offsets, std::vector<uint32_t> indices) {
    Dataset d;
    d.name = name;
    d.rows = offsets.size() - 1;
    d.cols = 10;
    d.offsets = std::move(offsets);
    d.indices = std::move(indices);
    return d;
}

TEST(DuplicateTargets, TheTrainerRefusesAnInMemoryTargetDatasetWithARepeatedColumn) {
    const Dataset in = csr("in", {0, 2, 3, 5}, {1, 4, 2, 0, 9});
    const Dataset out = csr("out", {0, 1, 4, 5}, {3, 2, 7, 7, 5});
    NetworkOptions no;
    no.device = "cpu";
    Network net = Network::create(NetworkConfig::from_json(kNet), {{"in", 10}, {"out", 10}}, no);
    TrainOptions o;
    o.epochs = 1;
    o.batch = 2;
    const std::string msg = expect_error(
        [&] {
            Trainer t(net, {{"in", &in}, {"out", &out}}, o);
        },
        ErrorCategory::kData);
    EXPECT_TRUE(contains(msg,
                         "dataset 'out' (targets of output layer 'Output'): row 1: "
                         "duplicate column 7"))
        << msg;
    // The same rows as inputs are fine: csr_matmul and csr_weight_grad sum repeated entries.
    const Dataset fixed = csr("out", {0, 1, 3, 4}, {3, 2, 7, 5});
    Trainer ok(net, {{"in", &in}, {"out", &fixed}}, o);
    EXPECT_EQ(ok.fit().size(), 1u);
}

TEST(DuplicateTargets, TheCpuOpRefusesTheRowAndWritesNothing) {
    CpuBackend backend(1);
    const Dataset t = csr("t", {0, 1, 3}, {4, 6, 6});
    const testing::TestBatch batch = testing::make_batch(2, 2, false, 0);
    std::vector<float> a(20, 0.5f), delta(20, 99.0f);
    formulas::LossParams p;
    p.kind = ErrorFunction::kL2;
    formulas::ActivationParams act;
    act.kind = Activation::kSigmoid;
    double loss = 0.0;
    const std::string msg = expect_error(
        [&] {
            backend.output_delta(p, act, ConstMatrixView(a.data(), 2, 10, 10),
                                 testing::csr_view(t, batch), 1.0f,
                                 MatrixView{delta.data(), 2, 10, 10}, &loss);
        },
        ErrorCategory::kInternal);
    EXPECT_TRUE(contains(msg, "output_delta: target row 1: column 6 repeated or out of order"))
        << msg;
    for (float v : delta) EXPECT_EQ(v, 99.0f);
    EXPECT_EQ(loss, 0.0);
}

}  // namespace
}  // namespace sparsenet

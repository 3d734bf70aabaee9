// Model files written and read a piece at a time (io::ModelWriter, io::ModelReader): rows written
// in any order and chunking give the file write_model gives (same header, same values); a
// hyperslab read is that part of the whole read; a writer that is not committed leaves the old
// file; shapes that disagree with the config are refused naming the file and the expectation.
#include <gtest/gtest.h>
#include <netcdf.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/model_file.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

// A tied autoencoder: In -> H owns its matrix, H -> Out uses it transposed (no variable).
const char* const kConfig = R"({
    "Name": "tied", "ErrorFunction": "ScaledMarginalCrossEntropy",
    "Layers": [
        {"Name": "In", "Kind": "Input", "N": 11, "DataSet": "x", "Sparse": true},
        {"Name": "H", "Kind": "Hidden", "N": 6, "Activation": "Sigmoid"},
        {"Name": "Mid", "Kind": "Hidden", "N": 9, "Activation": "Tanh", "Source": "H"},
        {"Name": "Out", "Kind": "Output", "N": 11, "DataSet": "x", "Activation": "Sigmoid",
         "Source": ["Mid", "H"],
         "SharedWeights": {"InputLayer": "H", "SourceInputLayer": "In",
                           "SourceOutputLayer": "H", "Transposed": true}}
    ]})";

std::vector<float> random_values(size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

// A checkpoint of the config above with two optimizer slots and random values.
io::ModelFile checkpoint() {
    std::mt19937 rng(5);
    io::ModelFile m;
    m.config = NetworkConfig::from_json(kConfig);
    auto weight = [&](const char* in, const char* out, uint64_t rows, uint64_t cols) {
        io::ModelWeight w;
        w.input_layer = in;
        w.output_layer = out;
        w.rows = rows;
        w.cols = cols;
        w.values = random_values(rows * cols, rng);
        w.state1 = random_values(rows * cols, rng);
        w.state2 = random_values(rows * cols, rng);
        return w;
    };
    m.weights.push_back(weight("In", "H", 11, 6));
    m.weights.push_back(weight("H", "Mid", 6, 9));
    m.weights.push_back(weight("Mid", "Out", 9, 11));
    io::ModelWeight tied;
    tied.input_layer = "H";
    tied.output_layer = "Out";
    tied.rows = 6;
    tied.cols = 11;
    tied.shared = true;
    tied.transposed = true;
    tied.source_input_layer = "In";
    tied.source_output_layer = "H";
    m.weights.push_back(tied);
    for (const auto& [layer, n] :
         {std::pair<const char*, size_t>{"H", 6}, {"Mid", 9}, {"Out", 11}}) {
        io::ModelBias b;
        b.layer = layer;
        b.values = random_values(n, rng);
        b.state1 = random_values(n, rng);
        b.state2 = random_values(n, rng);
        m.biases.push_back(b);
    }
    io::ModelTrainingState t;
    t.optimizer = "adam";
    t.optimizer_steps = 17;
    t.epochs_complete = 2;
    t.batches_done = 3;
    t.loss_sum = 12.5;
    t.options = R"({"batch":"4"})";
    t.notes = {{"best_epoch", "2"}};
    m.training = t;
    return m;
}

io::ModelLayout layout_of(const io::ModelFile& m) {
    io::ModelLayout layout;
    layout.config = m.config;
    layout.training = m.training;
    for (const io::ModelWeight& w : m.weights) {
        layout.weights.push_back({w.input_layer, w.output_layer, w.rows, w.cols, w.shared,
                                  w.transposed, w.source_input_layer, w.source_output_layer,
                                  w.shared ? 0 : 2});
    }
    for (const io::ModelBias& b : m.biases) layout.biases.push_back({b.layer, b.values.size(), 2});
    return layout;
}

// The header as text: every dimension, variable (type, dimensions) and global attribute (type,
// values), in the file's order.
std::string header(const std::string& path) {
    int nc = -1;
    EXPECT_EQ(nc_open(path.c_str(), NC_NOWRITE, &nc), NC_NOERR) << path;
    int ndims = 0, nvars = 0, natts = 0, unlimited = 0;
    nc_inq(nc, &ndims, &nvars, &natts, &unlimited);
    std::string text;
    for (int d = 0; d < ndims; ++d) {
        char name[NC_MAX_NAME + 1] = {};
        size_t len = 0;
        nc_inq_dim(nc, d, name, &len);
        text += "dim " + std::string(name) + " " + std::to_string(len) + "\n";
    }
    for (int v = 0; v < nvars; ++v) {
        char name[NC_MAX_NAME + 1] = {};
        nc_type type;
        int vdims = 0, dims[NC_MAX_VAR_DIMS], vatts = 0;
        nc_inq_var(nc, v, name, &type, &vdims, dims, &vatts);
        text += "var " + std::string(name) + " type " + std::to_string(type) + " dims";
        for (int d = 0; d < vdims; ++d) text += " " + std::to_string(dims[d]);
        int storage = 0;
        size_t chunks[NC_MAX_VAR_DIMS] = {};
        nc_inq_var_chunking(nc, v, &storage, chunks);
        text += " storage " + std::to_string(storage) + " atts " + std::to_string(vatts) + "\n";
    }
    for (int a = 0; a < natts; ++a) {
        char name[NC_MAX_NAME + 1] = {};
        nc_inq_attname(nc, NC_GLOBAL, a, name);
        nc_type type;
        size_t len = 0;
        nc_inq_att(nc, NC_GLOBAL, name, &type, &len);
        text += "att " + std::string(name) + " type " + std::to_string(type) + " = ";
        if (type == NC_CHAR) {
            std::string v(len, '\0');
            nc_get_att_text(nc, NC_GLOBAL, name, v.data());
            text += v;
        } else {
            std::vector<double> v(len);
            nc_get_att_double(nc, NC_GLOBAL, name, v.data());
            for (double x : v) text += std::to_string(x) + " ";
        }
        text += "\n";
    }
    nc_close(nc);
    return text;
}

void expect_same_model(const io::ModelFile& a, const io::ModelFile& b) {
    EXPECT_EQ(a.config.to_json(), b.config.to_json());
    ASSERT_EQ(a.weights.size(), b.weights.size());
    for (size_t i = 0; i < a.weights.size(); ++i) {
        const io::ModelWeight& x = a.weights[i];
        const io::ModelWeight& y = b.weights[i];
        EXPECT_EQ(x.input_layer, y.input_layer) << i;
        EXPECT_EQ(x.output_layer, y.output_layer) << i;
        EXPECT_EQ(x.rows, y.rows) << i;
        EXPECT_EQ(x.cols, y.cols) << i;
        EXPECT_EQ(x.shared, y.shared) << i;
        EXPECT_EQ(x.transposed, y.transposed) << i;
        EXPECT_EQ(x.source_input_layer, y.source_input_layer) << i;
        EXPECT_EQ(x.source_output_layer, y.source_output_layer) << i;
        EXPECT_EQ(x.values, y.values) << i;
        EXPECT_EQ(x.state1, y.state1) << i;
        EXPECT_EQ(x.state2, y.state2) << i;
    }
    ASSERT_EQ(a.biases.size(), b.biases.size());
    for (size_t i = 0; i < a.biases.size(); ++i) {
        EXPECT_EQ(a.biases[i].layer, b.biases[i].layer) << i;
        EXPECT_EQ(a.biases[i].values, b.biases[i].values) << i;
        EXPECT_EQ(a.biases[i].state1, b.biases[i].state1) << i;
        EXPECT_EQ(a.biases[i].state2, b.biases[i].state2) << i;
    }
    ASSERT_EQ(a.training.has_value(), b.training.has_value());
    if (a.training) {
        EXPECT_EQ(a.training->optimizer, b.training->optimizer);
        EXPECT_EQ(a.training->optimizer_steps, b.training->optimizer_steps);
        EXPECT_EQ(a.training->epochs_complete, b.training->epochs_complete);
        EXPECT_EQ(a.training->batches_done, b.training->batches_done);
        EXPECT_EQ(a.training->loss_sum, b.training->loss_sum);
        EXPECT_EQ(a.training->options, b.training->options);
        EXPECT_EQ(a.training->notes, b.training->notes);
    }
}

std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

TEST(ModelWriter, RowsInAnyOrderGiveTheFileWriteModelGives) {
    testing::TempDir dir;
    const io::ModelFile model = checkpoint();
    io::write_model(dir.file("whole.nc"), model);
    std::mt19937 rng(3);
    {
        io::ModelWriter writer(dir.file("rows.nc"), layout_of(model));
        // Every (weight, slot): chunks of 1-4 rows, in shuffled order across all variables.
        struct Piece {
            size_t weight;
            int slot;
            uint64_t first, rows;
        };
        std::vector<Piece> pieces;
        for (size_t i = 0; i < model.weights.size(); ++i) {
            if (model.weights[i].shared) continue;
            for (int s = 0; s < 3; ++s) {
                for (uint64_t first = 0; first < model.weights[i].rows;) {
                    const uint64_t n =
                        std::min<uint64_t>(1 + rng() % 4, model.weights[i].rows - first);
                    pieces.push_back({i, s, first, n});
                    first += n;
                }
            }
        }
        std::shuffle(pieces.begin(), pieces.end(), rng);
        for (const Piece& p : pieces) {
            const io::ModelWeight& w = model.weights[p.weight];
            const std::vector<float>& v = p.slot == 0   ? w.values
                                          : p.slot == 1 ? w.state1
                                                        : w.state2;
            writer.write_rows(p.weight, io::ModelSlot(p.slot), p.first, p.rows,
                              v.data() + p.first * w.cols);
        }
        for (size_t i = model.biases.size(); i-- > 0;) {
            const io::ModelBias& b = model.biases[i];
            writer.write_bias(i, io::ModelSlot::kState2, b.state2.data());
            writer.write_bias(i, io::ModelSlot::kValues, b.values.data());
            writer.write_bias(i, io::ModelSlot::kState1, b.state1.data());
        }
        writer.commit();
    }
    EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{"rows.nc", "whole.nc"}));
    EXPECT_EQ(header(dir.file("rows.nc")), header(dir.file("whole.nc")));
    const io::ModelFile whole = io::read_model(dir.file("whole.nc"), true);
    expect_same_model(whole, model);
    expect_same_model(io::read_model(dir.file("rows.nc"), true), whole);
    // A plain model (no training state) too.
    io::ModelFile plain = model;
    plain.training.reset();
    for (io::ModelWeight& w : plain.weights) w.state1.clear(), w.state2.clear();
    for (io::ModelBias& b : plain.biases) b.state1.clear(), b.state2.clear();
    io::write_model(dir.file("plain.nc"), plain);
    expect_same_model(io::read_model(dir.file("plain.nc")), plain);
}

TEST(ModelWriter, WithoutACommitTheOldFileStaysAndNoTemporaryRemains) {
    testing::TempDir dir;
    const io::ModelFile model = checkpoint();
    const std::string path = dir.file("model.nc");
    io::write_model(path, model);
    const std::string before = testing::read_file(path);
    io::ModelFile other = model;
    other.weights[0].values.assign(other.weights[0].values.size(), 1.0f);
    {
        io::ModelWriter writer(path, layout_of(other));
        writer.write_rows(0, io::ModelSlot::kValues, 0, 11, other.weights[0].values.data());
    }  // an error between the writes: no commit
    EXPECT_EQ(testing::read_file(path), before);
    EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{"model.nc"});
    // A commit before every row was written is refused (a bug in the caller), as safely.
    io::ModelWriter writer(path, layout_of(other));
    writer.write_rows(0, io::ModelSlot::kValues, 0, 5, other.weights[0].values.data());
    const std::string message =
        testing::expect_error([&] { writer.commit(); }, ErrorCategory::kInternal);
    EXPECT_TRUE(testing::contains(message, "cannot save the model to " + path)) << message;
    EXPECT_TRUE(testing::contains(message, "5 of the 11 rows of weight0_weights")) << message;
    EXPECT_EQ(testing::read_file(path), before);
    EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{"model.nc"});
}

TEST(ModelReader, HyperslabsAreThePartsOfTheWholeValues) {
    testing::TempDir dir;
    const io::ModelFile model = checkpoint();
    io::write_model(dir.file("m.nc"), model);
    const io::ModelReader reader(dir.file("m.nc"), true);
    ASSERT_EQ(reader.layout().weights.size(), 4u);
    EXPECT_EQ(reader.layout().weights[2].state_slots, 2);
    EXPECT_TRUE(reader.layout().weights[3].shared);
    EXPECT_EQ(reader.layout().biases[1].units, 9u);
    // Every block [r0, r0 + rows) x [c0, c0 + cols) of weight 2 (9 x 11), every slot.
    const io::ModelWeight& w = model.weights[2];
    for (int s = 0; s < 3; ++s) {
        const std::vector<float>& whole = s == 0 ? w.values : s == 1 ? w.state1 : w.state2;
        for (uint64_t r0 = 0; r0 < w.rows; r0 += 2) {
            for (uint64_t c0 = 0; c0 < w.cols; c0 += 3) {
                const uint64_t rows = std::min<uint64_t>(4, w.rows - r0);
                const uint64_t cols = std::min<uint64_t>(5, w.cols - c0);
                std::vector<float> block(rows * cols, -1.0f);
                reader.read_block(2, io::ModelSlot(s), r0, rows, c0, cols, block.data());
                for (uint64_t r = 0; r < rows; ++r) {
                    for (uint64_t c = 0; c < cols; ++c) {
                        ASSERT_EQ(block[r * cols + c], whole[(r0 + r) * w.cols + c0 + c])
                            << "slot " << s << " at " << r0 + r << ", " << c0 + c;
                    }
                }
            }
        }
    }
    std::vector<float> part(4);
    reader.read_bias(2, io::ModelSlot::kState1, 5, 4, part.data());
    EXPECT_EQ(part, std::vector<float>(model.biases[2].state1.begin() + 5,
                                       model.biases[2].state1.begin() + 9));
    // Read as a model (no state asked), the slots are not part of the layout.
    const io::ModelReader plain(dir.file("m.nc"));
    EXPECT_EQ(plain.layout().weights[0].state_slots, 0);
    ASSERT_TRUE(plain.layout().training.has_value());
    EXPECT_EQ(plain.layout().training->batches_done, 3u);
}

TEST(ModelReader, ShapesThatDisagreeWithTheConfigAreRefusedByName) {
    testing::TempDir dir;
    io::ModelFile model = checkpoint();
    model.weights[1].cols = 8;  // the config's Mid has 9 units
    model.weights[1].values.resize(6 * 8);
    model.weights[1].state1.resize(6 * 8);
    model.weights[1].state2.resize(6 * 8);
    const std::string path = dir.file("bad.nc");
    io::write_model(path, model);
    const std::string message =
        testing::expect_error([&] { io::ModelReader reader(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(testing::contains(message, path + ": model variable 'weight1_weights' has shape "
                                                  "[6, 8]; expected [6, 9]"))
        << message;
    EXPECT_TRUE(testing::contains(message, "layers 'H' -> 'Mid'")) << message;

    model = checkpoint();
    model.biases[0].values.resize(5);  // H has 6 units
    model.biases[0].state1.resize(5);
    model.biases[0].state2.resize(5);
    io::write_model(path, model);
    const std::string bias =
        testing::expect_error([&] { (void)io::read_model(path); }, ErrorCategory::kIo);
    EXPECT_TRUE(testing::contains(bias, path + ": model variable 'bias0' has shape [5]; "
                                               "expected [6] (the size of layer 'H'"))
        << bias;
}

}  // namespace
}  // namespace sparsenet

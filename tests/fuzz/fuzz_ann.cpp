// libFuzzer target: the ANN index file reader (src/engine/ann_index.cpp, src/engine/ann_ivf.cpp)
// through a Recommender of a fixed small model, then one query. The first byte of an input
// picks how the rest becomes the index file: 0, as it is; 1 or 2, written over a valid index of
// the model (kind ivf, kind flat) at the offset its next two bytes give, so that mutations reach
// past the header, which must match the model. Files of kind hnsw are not loaded: hnswlib's
// loader trusts its file (docs/reliability.md). Only sparsenet::Error may come out; anything
// else, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_util.h"
#include "sparsenet/ann_index.h"
#include "sparsenet/config.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/recommender.h"

namespace {

struct Fixture {
    sparsenet_fuzz::ScratchFile model{".nc"}, index{".ann"};
    std::string ivf, flat;  // valid indexes of the model
    Fixture() {
        sparsenet::NetworkOptions options;
        options.device = "cpu";
        options.threads = 1;
        options.comm = sparsenet::CommKind::kLocal;
        options.seed = 5;
        const sparsenet::NetworkConfig config = sparsenet::NetworkConfig::from_json(R"({
          "Version": 0.9, "Name": "fuzz-ann", "Kind": "AutoEncoder", "ErrorFunction": "L2",
          "Layers": [
            {"Name": "Input", "Kind": "Input", "N": "auto", "DataSet": "in", "Sparse": true},
            {"Name": "Hidden", "Kind": "Hidden", "N": 6, "Activation": "Tanh"},
            {"Name": "Output", "Kind": "Output", "N": "auto", "DataSet": "out",
             "Activation": "Sigmoid"}]})");
        sparsenet::Network::create(config, {{"in", 48}, {"out", 48}}, options).save(model.path());
        ivf = build("ivf");
        flat = build("flat");
    }
    std::string build(const std::string& kind) const {
        sparsenet::AnnIndexOptions o;
        o.kind = kind;
        o.cells = 5;
        o.threads = 1;
        sparsenet::build_ann_index(model.path(), index.path(), o);
        std::ifstream in(index.path(), std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const Fixture fixture;
    if (size < 1) return 0;
    std::string file;
    if (data[0] % 3 == 0 || size < 3) {
        file.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
    } else {
        file = data[0] % 3 == 1 ? fixture.ivf : fixture.flat;
        const size_t at = (size_t(data[1]) | size_t(data[2]) << 8) % (file.size() + 1);
        const std::string patch(reinterpret_cast<const char*>(data) + 3, size - 3);
        file.replace(at, std::min(patch.size(), file.size() - at), patch);
    }
    // The kind, the first string after the magic and the version: hnsw files are not loaded.
    if (file.size() >= 28 && file.compare(24, 4, "hnsw") == 0) return 0;
    fixture.index.write(reinterpret_cast<const uint8_t*>(file.data()), file.size());
    sparsenet::RecommenderOptions o;
    o.ann_index = fixture.index.path();
    try {
        const sparsenet::Recommender recommender(fixture.model.path(), o);
        sparsenet::RecommendOptions query;
        query.k = 10;
        recommender.recommend({sparsenet::ItemRef(3), sparsenet::ItemRef(17)}, query);
    } catch (const sparsenet::Error&) {
    }
    return 0;
}

// libFuzzer target: the model file reader (src/io/model_file.cpp) through Network::load on the
// CPU backend (one thread, local communicator), then, when the network is small, one forward pass
// of a Predictor on a one-row input. Only sparsenet::Error may come out; anything else, a crash
// or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>

#include "fuzz_util.h"
#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/error.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const sparsenet_fuzz::ScratchFile file(".nc");
    const std::string& path = file.write(data, size);
    sparsenet::NetworkOptions options;
    options.device = "cpu";
    options.threads = 1;
    options.comm = sparsenet::CommKind::kLocal;
    try {
        sparsenet::Network network = sparsenet::Network::load(path, options);
        // A forward pass of small networks only (the loader's own allocations are bounded by the
        // file's size; a forward pass allocates batch x units).
        uint64_t units = 0;
        for (const sparsenet::LayerConfig& layer : network.config().layers) units += layer.n;
        if (units > 4096) return 0;
        std::list<sparsenet::Dataset> inputs;
        std::map<std::string, const sparsenet::Dataset*> by_name;
        for (const sparsenet::LayerConfig& layer : network.config().layers) {
            if (layer.kind != sparsenet::LayerKind::kInput || by_name.count(layer.dataset))
                continue;
            sparsenet::Dataset& d = inputs.emplace_back();
            d.name = layer.dataset;
            d.rows = 1;
            d.cols = layer.n;
            if (layer.n > 0) {
                d.indices = {0, layer.n - 1};
                if (layer.n == 1) d.indices.pop_back();
            }
            d.offsets = {0, d.indices.size()};
            by_name[d.name] = &d;
        }
        sparsenet::Predictor predictor(network, by_name);
        (void)predictor.scores(0, 1);
    } catch (const sparsenet::Error&) {
        // Expected: the file was refused with a message.
    }
    return 0;
}

// The small network the padded-rows and in-place-delta tests train both ways and compare bit for
// bit: a planted dataset of 300 users over 83 items (ld 96 padded) and a CPU network over it.
#pragma once

#include <string>

#include "sparsenet/config.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"

namespace sparsenet::testing {

// 300 rows over 83 items with planted structure, named `name`.
inline Dataset planted(const std::string& name) {
    GenerateOptions g;
    g.users = 300;
    g.items = 83;
    g.nnz = 4000;
    g.seed = 5;
    Dataset d = generate(g).train;
    d.name = name;
    return d;
}

// The network of `json` over datasets "in" and "out" of 83 items, on the CPU (2 threads, seed 11).
inline Network make_network(const std::string& json,
                            const StepSwitches& switches = StepSwitches::process()) {
    NetworkOptions no;
    no.switches = switches;
    no.device = "cpu";
    no.threads = 2;
    no.seed = 11;
    return Network::create(NetworkConfig::from_json(json), {{"in", 83}, {"out", 83}}, no);
}

}  // namespace sparsenet::testing

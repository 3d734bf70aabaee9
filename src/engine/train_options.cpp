// train_options: the TrainOptions a config's Training section and Decay describe.
#include "sparsenet/trainer.h"

namespace sparsenet {

TrainOptions train_options(const NetworkConfig& config) {
    TrainOptions options;
    if (config.training) {
        const TrainingConfig& t = *config.training;
        options.optimizer = t.optimizer;
        options.epochs = t.epochs;
        options.batch = t.batch;
        options.seed = t.seed;
    }
    options.decay = config.decay;
    return options;
}

}  // namespace sparsenet

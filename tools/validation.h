// train --validate-input/--validate-target/--keep-best: ranking metrics of the network being
// trained on validation rows after every epoch, and the model file of the best epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ranking_report.h"
#include "sparsenet/dataset.h"
#include "sparsenet/network.h"
#include "sparsenet/predictor.h"
#include "sparsenet/trainer.h"

namespace sparsenet::cli {

struct ValidationOptions {
    std::string input_path;   // the validation rows' known items (fed to the network)
    std::string target_path;  // their held-out items
    std::vector<uint32_t> ks{20};
    std::optional<MetricSpec> keep_best;  // save the model whenever this metric improves
    std::string model_path;
    uint32_t batch = 1024;  // rows per scoring batch
};

class Validation {
  public:
    // Reads and checks both files against the network (single Input layer, widths, rows) and
    // uploads the validation input once.
    Validation(Network& network, ValidationOptions options);
    ~Validation();

    // Scores the validation rows with the network as it is now (inference mode, input items
    // excluded). note: the line to print; json_fields: ', "validation": {...}' for the epoch's
    // JSON line. With keep_best, saves the model when the metric improved (strictly).
    void on_epoch(const EpochStats& stats, std::string* note, std::string* json_fields);

    uint32_t best_epoch() const { return best_epoch_; }  // 0: none saved
    double best_value() const { return best_value_; }
    const ValidationOptions& options() const { return options_; }
    // A resumed run (train --resume): the best epoch so far and its value, from the checkpoint.
    void restore_best(uint32_t epoch, double value) {
        best_epoch_ = epoch;
        best_value_ = value;
    }

  private:
    Network& network_;
    ValidationOptions options_;
    Dataset input_;
    Dataset target_;
    uint32_t items_ = 0;
    std::unique_ptr<Predictor> predictor_;
    uint32_t best_epoch_ = 0;
    double best_value_ = 0.0;
};

}  // namespace sparsenet::cli

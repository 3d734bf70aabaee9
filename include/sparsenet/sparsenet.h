// The whole public API in one include: #include <sparsenet/sparsenet.h>. Every header below also
// stands alone (C++17 standard library only); docs/library.md says what each one is for.
#pragma once

#include "sparsenet/ann_index.h"      // ANN index files: approximate top-K for large catalogues
#include "sparsenet/config.h"         // NetworkConfig: DSSTNE's JSON network language
#include "sparsenet/convert.h"        // text interactions -> Dataset; LabelIndex
#include "sparsenet/dataset.h"        // Dataset (sparse CSR), netCDF read/write, generate
#include "sparsenet/device_choice.h"  // what the "auto" device took and why
#include "sparsenet/error.h"          // sparsenet::Error, the one exception type
#include "sparsenet/index_file.h"     // DSSTNE index files ('label<TAB>index')
#include "sparsenet/job.h"            // this process's rank in an MPI job
#include "sparsenet/metrics.h"        // Recall, NDCG, ... at several K
#include "sparsenet/model_info.h"     // what a model file holds, values unread
#include "sparsenet/network.h"        // Network: create, load, save
#include "sparsenet/optimizer.h"      // optimizers and their settings
#include "sparsenet/predictor.h"      // batch inference and top-K with exclusions
#include "sparsenet/rank_device.h"    // each rank of an MPI job on its own GPU
#include "sparsenet/recommender.h"    // Recommender: the thread-safe serving API
#include "sparsenet/resources.h"      // sizes, storage hints, out-of-memory advice for messages
#include "sparsenet/split.h"          // train / validation / test splits
#include "sparsenet/step_switches.h"  // the training step's switches, to measure each change
#include "sparsenet/trainer.h"        // Trainer: epochs, callbacks, checkpoints

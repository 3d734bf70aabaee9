#!/usr/bin/env python3
"""PyTorch peer for the autoencoder workloads: the network of a DSSTNE JSON config written the way
a competent PyTorch user would, trained on the same netCDF dataset with the same batch, threads
and epochs, timing only the epoch loop (data already in memory, like sparsenet's epoch time).

Variants:
  sparse   first layer as nn.EmbeddingBag(mode="sum", sparse=True) over the batch's CSR indices (the sparse
           gather), nn.Linear elsewhere, fused BCEWithLogits loss on the dense output;
  densify  each batch densified to [batch, items], then nn.Linear everywhere (common practice).

Supports the fully connected configs of the benchmarks: Sigmoid/Tanh/ReLU hidden layers with
pDropout; a Sigmoid output with ScaledMarginalCrossEntropy (oneTarget 1, zeroTarget 0, scales 1
is exactly binary cross-entropy, fused as BCEWithLogitsLoss) or a SoftMax output with
CrossEntropy (multinomial: -sum t log softmax, fused as log_softmax); Denoising p as inverted
dropout of the input entries (per_sample_weights of the EmbeddingBag, F.dropout when densified);
SGD, or Adam when the config's Training section says so (the sparse variant then uses SparseAdam
for the EmbeddingBag, the lazy update a competent user picks, and sparsenet runs with
--sparse-updates lazy to match). Prints one JSON line.

usage: torch_autoencoder.py --config CFG.json --data DATA.nc --variant sparse|densify
       [--batch 256] [--epochs 1] [--threads 2] [--learning-rate 0.025] [--seed 1]
"""
import argparse
import json
import time

import netCDF4
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_csr(path, name="gl_input"):
    with netCDF4.Dataset(path) as nc:
        n = next(i for i in range(int(nc.datasets)) if nc.getncattr(f"name{i}") == name)
        start = np.asarray(nc.variables[f"sparseStart{n}"][:], dtype=np.int64)
        end = np.asarray(nc.variables[f"sparseEnd{n}"][:], dtype=np.int64)
        index = np.asarray(nc.variables[f"sparseIndex{n}"][:], dtype=np.int64)
        width = int(nc.getncattr(f"width{n}"))
    assert np.all(start[1:] == end[:-1]), "contiguous rows expected"
    offsets = np.concatenate([start[:1], end])
    return torch.from_numpy(offsets), torch.from_numpy(index), width


ACTIVATIONS = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "rectifiedlinear": nn.ReLU, "relu": nn.ReLU}


class Autoencoder(nn.Module):
    def __init__(self, cfg, items, sparse_first):
        super().__init__()
        layers = [l for l in cfg["Layers"] if l["Kind"] != "Input"]
        sizes = [items] + [items if l["N"] == "auto" else int(l["N"]) for l in layers]
        self.sparse_first = sparse_first
        if sparse_first:
            self.first = nn.EmbeddingBag(items, sizes[1], mode="sum", sparse=True)
            self.first_bias = nn.Parameter(torch.zeros(sizes[1]))
        else:
            self.first = nn.Linear(items, sizes[1])
        blocks = []
        for i, layer in enumerate(layers):
            if i > 0:
                blocks.append(nn.Linear(sizes[i], sizes[i + 1]))
            if layer["Kind"] == "Hidden":
                blocks.append(ACTIVATIONS[layer.get("Activation", "Sigmoid").lower()]())
                if layer.get("pDropout", 0) > 0:
                    blocks.append(nn.Dropout(layer["pDropout"]))
        self.rest = nn.Sequential(*blocks)  # the output layer's logits (sigmoid fused in the loss)
        out_bias = layers[-1].get("WeightInit", {}).get("Bias", 0.0)
        last = [m for m in self.rest if isinstance(m, nn.Linear)][-1]
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.EmbeddingBag)):
                nn.init.normal_(m.weight, std=0.01)
        nn.init.constant_(last.bias, out_bias)

    def forward(self, indices, offsets, dense, input_weights=None):
        if self.sparse_first:
            h = self.first(indices, offsets, per_sample_weights=input_weights) + self.first_bias
        else:
            h = self.first(dense)
        return self.rest(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--variant", choices=["sparse", "densify"], required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--learning-rate", type=float, default=None,
                   help="default: the config's Training.Alpha, else 0.025")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = json.load(open(a.config))
    offsets, index, items = read_csr(a.data)
    rows = len(offsets) - 1
    model = Autoencoder(cfg, items, a.variant == "sparse")
    training = cfg.get("Training", {})
    lr = a.learning_rate if a.learning_rate is not None else training.get("Alpha", 0.025)
    if training.get("Optimizer", "SGD").lower() == "adam":
        if a.variant == "sparse":
            dense_params = [p for n, p in model.named_parameters() if n != "first.weight"]
            opts = [torch.optim.SparseAdam([model.first.weight], lr=lr),
                    torch.optim.Adam(dense_params, lr=lr)]
        else:
            opts = [torch.optim.Adam(model.parameters(), lr=lr)]
    else:
        opts = [torch.optim.SGD(model.parameters(), lr=lr)]
    out_layer = [l for l in cfg["Layers"] if l["Kind"] == "Output"][-1]
    softmax = out_layer.get("Activation", "Sigmoid").lower() == "softmax"
    if softmax:
        def loss_fn(logits, target):
            return -(F.log_softmax(logits, dim=1) * target).sum()
    else:
        loss_fn = nn.BCEWithLogitsLoss(reduction="sum")
    denoise = float(cfg.get("Denoising", {}).get("p", 0.0))
    seconds, losses = [], []
    for _ in range(a.epochs):
        start = time.perf_counter()
        total = 0.0
        model.train()
        for first in range(0, rows, a.batch):
            last = min(rows, first + a.batch)
            b0, b1 = int(offsets[first]), int(offsets[last])
            idx = index[b0:b1]
            offs = offsets[first:last] - b0
            row_of = torch.repeat_interleave(torch.arange(last - first), offsets[first + 1:last + 1] - offsets[first:last])
            target = torch.zeros(last - first, items)
            target[row_of, idx] = 1.0
            dense, weights = None, None
            if a.variant == "densify":
                dense = F.dropout(target, denoise) if denoise > 0 else target
            elif denoise > 0:
                weights = (torch.rand(idx.shape[0]) >= denoise).float() / (1.0 - denoise)
            logits = model(idx, offs, dense, weights)
            loss = loss_fn(logits, target) / (last - first)
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            total += float(loss) * (last - first)
            loss.backward()
            for opt in opts:
                opt.step()
        seconds.append(time.perf_counter() - start)
        losses.append(total / rows)
    print(json.dumps({"system": f"pytorch-{a.variant}", "torch": torch.__version__,
                      "threads": a.threads, "examples": rows, "seconds": seconds,
                      "loss": losses}))


if __name__ == "__main__":
    main()

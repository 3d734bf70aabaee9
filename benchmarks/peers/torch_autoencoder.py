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

On a GPU (--device cuda) the dataset is resident on the device, as sparsenet's is, and nothing
waits for the GPU inside the epoch (the loss is summed on the device): the epoch ends with one
synchronisation. --compile runs everything after the first layer, the loss included, through
torch.compile (the sparse EmbeddingBag and its sparse gradient stay eager: the compiler does not
take sparse gradients); the first epoch then includes compilation. --tf32 lets matrix products
use TF32 tensor cores (compare with sparsenet under SPARSENET_CUDA_TF32=1). The dataset is read
with netCDF4 where it is installed, else with h5py (a netCDF-4 file is an HDF5 file).

usage: torch_autoencoder.py --config CFG.json --data DATA.nc --variant sparse|densify
       [--batch 256] [--epochs 1] [--threads 2] [--learning-rate 0.025] [--seed 1]
       [--device cpu|cuda] [--compile] [--tf32] [--bf16] [--check-data]
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_netcdf_csr(path, name):
    """(start, end, index, width) of dataset `name` in DSSTNE's netCDF layout (data-format.md)."""
    try:
        import netCDF4
    except ImportError:
        netCDF4 = None
    if netCDF4 is not None:
        with netCDF4.Dataset(path) as nc:
            n = next(i for i in range(int(nc.datasets)) if nc.getncattr(f"name{i}") == name)
            return (nc.variables[f"sparseStart{n}"][:], nc.variables[f"sparseEnd{n}"][:],
                    nc.variables[f"sparseIndex{n}"][:], int(nc.getncattr(f"width{n}")))
    import h5py

    def text(v):
        v = v.decode() if isinstance(v, bytes) else v
        return str(v[0] if isinstance(v, np.ndarray) else v)

    with h5py.File(path, "r") as f:
        count = int(np.asarray(f.attrs["datasets"]).reshape(-1)[0])
        n = next(i for i in range(count) if text(f.attrs[f"name{i}"]) == name)
        return (f[f"sparseStart{n}"][:], f[f"sparseEnd{n}"][:], f[f"sparseIndex{n}"][:],
                int(np.asarray(f.attrs[f"width{n}"]).reshape(-1)[0]))


def read_csr(path, name="gl_input"):
    start, end, index, width = read_netcdf_csr(path, name)
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    index = np.asarray(index, dtype=np.int64)
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
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--compile", action="store_true", help="torch.compile after the first layer")
    p.add_argument("--tf32", action="store_true", help="TF32 tensor cores for matrix products")
    p.add_argument("--bf16", action="store_true",
                   help="torch.autocast(dtype=torch.bfloat16) around the forward pass and the "
                        "loss: BF16 matrix products, FP32 weights and optimizer (compare with "
                        "sparsenet --precision bf16)")
    p.add_argument("--check-data", action="store_true",
                   help="read the dataset, print its rows, nonzeros and width as JSON, and stop")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    offsets, index, items = read_csr(a.data)
    rows = len(offsets) - 1
    if a.check_data:
        print(json.dumps({"rows": rows, "nonzeros": int(offsets[-1] - offsets[0]), "width": items}))
        return
    device = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    cfg = json.load(open(a.config))
    host_offsets = offsets.tolist()  # batch bounds without asking the device
    offsets, index = offsets.to(device), index.to(device)
    model = Autoencoder(cfg, items, a.variant == "sparse").to(device)
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
        bce = nn.BCEWithLogitsLoss(reduction="sum")

        def loss_fn(logits, target):
            return bce(logits, target)

    def head(h, target):  # everything after the first layer: the part torch.compile can take
        return loss_fn(model.rest(h), target) / target.shape[0]

    if a.compile:
        head = torch.compile(head)
    denoise = float(cfg.get("Denoising", {}).get("p", 0.0))
    seconds, losses = [], []
    for _ in range(a.epochs):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        total = torch.zeros((), dtype=torch.float64, device=device)
        model.train()
        for first in range(0, rows, a.batch):
            last = min(rows, first + a.batch)
            b0, b1 = host_offsets[first], host_offsets[last]
            idx = index[b0:b1]
            offs = offsets[first:last] - b0
            row_of = torch.repeat_interleave(torch.arange(last - first, device=device),
                                             offsets[first + 1:last + 1] - offsets[first:last],
                                             output_size=b1 - b0)
            target = torch.zeros(last - first, items, device=device)
            target[row_of, idx] = 1.0
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=a.bf16):
                if a.variant == "densify":
                    dense = F.dropout(target, denoise) if denoise > 0 else target
                    h = model.first(dense)
                else:
                    weights = None
                    if denoise > 0:
                        weights = (torch.rand(idx.shape[0], device=device) >= denoise).float() / (1.0 - denoise)
                    h = model.first(idx, offs, per_sample_weights=weights) + model.first_bias
                loss = head(h, target)
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            total += loss.detach() * (last - first)
            loss.backward()
            for opt in opts:
                opt.step()
        losses.append(float(total) / rows)  # float() waits for the epoch's last batch
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"system": f"pytorch-{a.variant}" + ("-compile" if a.compile else ""),
                      "torch": torch.__version__, "device": str(device),
                      "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                      "tf32": a.tf32, "bf16": a.bf16, "threads": a.threads, "examples": rows,
                      "seconds": seconds, "loss": losses}))


if __name__ == "__main__":
    main()

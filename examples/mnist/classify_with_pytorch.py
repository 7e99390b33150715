#!/usr/bin/python3
# The exercise's last step: classify images with the network dtrain trained, in plain PyTorch.
# Builds PyTorch's MNIST example network (conv1, conv2, fc1, fc2) from the model config that
# `dtrain ckpt export` writes into the file, loads the weights by name, normalises the images with
# the checkpoint's data.json and prints the classes of the first images of an IDX file, in the
# lines `dtrain predict` prints. Needs only PyTorch: no safetensors, torchvision or numpy.
#
#   build/bin/dtrain ckpt export runs/mnist/model_final --out exports/mnist.safetensors
#   /usr/bin/python3 examples/mnist/classify_with_pytorch.py exports/mnist.safetensors \
#       --data-json runs/mnist/model_final/data.json --images t10k-images-idx3-ubyte.gz --count 5
import argparse
import gzip
import json
import os
import struct
import sys

import torch
from torch import nn
import torch.nn.functional as F


def read_safetensors(path):
    """A safetensors file: 8 bytes little-endian header length, a JSON header, then the raw tensors.
    Returns ({name: float32 tensor}, {metadata})."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {}) or {}
    data = blob[8 + n:]
    if sys.byteorder != "little":
        sys.exit("this reader assumes a little-endian machine, as safetensors files are")
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {info['dtype']}; this reader takes the F32 files dtrain exports")
        begin, end = info["data_offsets"]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32) if end > begin else torch.zeros(0)
        tensors[name] = flat.reshape(info["shape"])
    return tensors, metadata


def read_idx_images(path):
    """MNIST's IDX image file (plain or .gz): magic 0x00000803, count, rows, columns (big-endian),
    then uint8 pixels. Returns a uint8 tensor [count, rows, columns]."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        blob = f.read()
    magic, count, rows, cols = struct.unpack(">IIII", blob[:16])
    if magic != 0x803:
        sys.exit(f"{path}: magic {magic:#010x} is not IDX images' 0x00000803 (a labels file?)")
    pixels = blob[16:16 + count * rows * cols]
    if len(pixels) != count * rows * cols:
        sys.exit(f"{path}: shorter than its {count} images of {rows}×{cols}")
    return torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(count, rows, cols)


def ints(text):
    return [int(x) for x in str(text).split(",") if x.strip()]


class Net(nn.Module):
    """PyTorch's MNIST example network, sized by dtrain's model config (model.kind = cnn): by
    default conv 1→32 3×3, ReLU, conv 32→64 3×3, ReLU, max-pool 2, dropout 0.25, flatten, linear
    9216→128, ReLU, dropout 0.5, linear 128→10. The parameters are named as in the example and in
    dtrain's checkpoints: conv1.weight, conv1.bias, conv2.*, fc1.*, fc2.*."""

    def __init__(self, cfg):
        super().__init__()
        channels, kernels, hidden = ints(cfg["channels"]), ints(cfg["kernel"]), ints(cfg["hidden"])
        if len(kernels) == 1:
            kernels *= len(channels)
        c, h, w, pad = cfg["in_channels"], cfg["height"], cfg["width"], cfg["padding"]
        self.conv_names, self.fc_names = [], []
        for i, (out, k) in enumerate(zip(channels, kernels)):
            setattr(self, f"conv{i + 1}", nn.Conv2d(c, out, k, padding=pad))
            self.conv_names.append(f"conv{i + 1}")
            c, h, w = out, h + 2 * pad - k + 1, w + 2 * pad - k + 1
        self.pool = cfg["pool"]
        if self.pool > 1:
            h, w = h // self.pool, w // self.pool
        self.dropout1 = nn.Dropout(cfg["conv_dropout"])
        self.dropout2 = nn.Dropout(cfg["dropout"])
        features = c * h * w
        for j, width in enumerate(hidden + [cfg["classes"]]):
            setattr(self, f"fc{j + 1}", nn.Linear(features, width))
            self.fc_names.append(f"fc{j + 1}")
            features = width

    def forward(self, x):
        for name in self.conv_names:
            x = F.relu(getattr(self, name)(x))
        if self.pool > 1:
            x = F.max_pool2d(x, self.pool)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        for name in self.fc_names[:-1]:
            x = self.dropout2(F.relu(getattr(self, name)(x)))
        return getattr(self, self.fc_names[-1])(x)  # class scores (the example returns their log_softmax)


def main():
    ap = argparse.ArgumentParser(description="Classify the first images of an IDX file with a dtrain CNN in PyTorch.")
    ap.add_argument("weights", help="model.safetensors written by `dtrain ckpt export`")
    ap.add_argument("--images", required=True, help="IDX images (e.g. t10k-images-idx3-ubyte.gz)")
    ap.add_argument("--data-json", required=True,
                    help="the checkpoint's data.json (RUN/model_final/data.json): mean, std, class names")
    ap.add_argument("--count", type=int, default=10, help="classify the first N images (default 10; 0: all)")
    ap.add_argument("--config", help="the model config (default: from the file's metadata, else WEIGHTS.config.json)")
    args = ap.parse_args()

    tensors, metadata = read_safetensors(args.weights)
    if args.config:
        cfg = json.load(open(args.config))
    elif "dtrain.model" in metadata:
        cfg = json.loads(metadata["dtrain.model"])
    else:
        cfg = json.load(open(os.path.splitext(args.weights)[0] + ".config.json"))
    if cfg.get("kind") != "cnn":
        sys.exit(f"{args.weights} holds a model.kind = {cfg.get('kind')} model, not a cnn")
    data = json.load(open(args.data_json))

    net = Net(cfg)
    net.load_state_dict(tensors, strict=True)  # every name and shape must match
    net.eval()  # dropout off

    images = read_idx_images(args.images)
    if args.count > 0:
        images = images[:args.count]
    if tuple(images.shape[1:]) != (cfg["height"], cfg["width"]) or cfg["in_channels"] != 1:
        sys.exit(f"{args.images}: {images.shape[1]}×{images.shape[2]} images, the model reads "
                 f"{cfg['in_channels']}×{cfg['height']}×{cfg['width']}")
    # torchvision's ToTensor() and Normalize(mean, std), with the statistics the model was trained on
    x = images.unsqueeze(1).to(torch.float32) / 255.0
    x = (x - float(data["mean"])) / float(data["std"])
    with torch.no_grad():
        p = F.softmax(net(x), dim=1)
    names = data.get("class_names") or [str(k) for k in range(cfg["classes"])]
    for i, row in enumerate(p):
        k = int(row.argmax())
        print(f"{i}: {k} {names[k]} (p {float(row[k]):.4f})")


if __name__ == "__main__":
    main()

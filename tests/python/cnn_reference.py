#!/usr/bin/python3
# dtrain's image classifier (model.kind = cnn) in plain PyTorch: by default PyTorch's MNIST example
# network (conv 1→32 3×3, ReLU, conv 32→64 3×3, ReLU, max-pool 2, dropout 0.25, flatten, linear
# →128, ReLU, dropout 0.5, linear →10; GELU for ReLU when asked), built from the checkpoint's model JSON with the example's
# parameter names (conv1.weight, …, fc2.bias), so dtrain's weights load by name. Used by parity.py
# for model.kind = cnn dumps and by bench/compare.sh as the PyTorch side.
import torch
from torch import nn

from reference_model import load_strict


def int_list(text):
    return [int(x) for x in str(text).split(",") if x.strip()]


class ReferenceCNN(nn.Module):
    """config: the model JSON of a dtrain checkpoint or dump (model.kind = cnn)."""

    KEYS = ("kind", "in_channels", "height", "width", "classes", "channels", "kernel", "padding", "pool", "hidden",
            "conv_dropout", "dropout", "activation")

    def __init__(self, config):
        super().__init__()
        cfg = dict(config)
        self.unknown_keys = sorted(k for k in cfg if k not in self.KEYS)
        self.missing_keys = sorted(k for k in self.KEYS if k not in cfg)
        if self.missing_keys:
            raise ValueError(f"cnn config lacks {self.missing_keys}")
        self.config = cfg
        if cfg["activation"] not in ("relu", "gelu"):
            raise ValueError(f"activation {cfg['activation']!r}")
        self.act = torch.relu if cfg["activation"] == "relu" else (lambda x: nn.functional.gelu(x, approximate="tanh"))
        channels, kernels, hidden = int_list(cfg["channels"]), int_list(cfg["kernel"]), int_list(cfg["hidden"])
        if len(kernels) == 1:
            kernels = kernels * len(channels)
        c, h, w, pad = cfg["in_channels"], cfg["height"], cfg["width"], cfg["padding"]
        self.convs = []
        for i, (k_out, k) in enumerate(zip(channels, kernels)):
            conv = nn.Conv2d(c, k_out, k, padding=pad)
            setattr(self, f"conv{i + 1}", conv)  # the example's names
            self.convs.append(conv)
            c, h, w = k_out, h + 2 * pad - k + 1, w + 2 * pad - k + 1
        self.pool = cfg["pool"]
        if self.pool > 1:
            h, w = h // self.pool, w // self.pool
        self.conv_dropout = nn.Dropout(cfg["conv_dropout"])
        self.dropout = nn.Dropout(cfg["dropout"])
        self.fcs = []
        features = c * h * w
        for j, width in enumerate(hidden + [cfg["classes"]]):
            fc = nn.Linear(features, width)
            setattr(self, f"fc{j + 1}", fc)
            self.fcs.append(fc)
            features = width

    def load_weights(self, state_dict):
        load_strict(self, state_dict)

    def scores(self, images):
        """images [B, C, H, W] (normalised) → class scores [B, classes]."""
        x = images
        for conv in self.convs:
            x = self.act(conv(x))
        if self.pool > 1:
            x = nn.functional.max_pool2d(x, self.pool)
        x = self.conv_dropout(x)
        x = torch.flatten(x, 1)
        for fc in self.fcs[:-1]:
            x = self.dropout(self.act(fc(x)))
        return self.fcs[-1](x)

    def forward(self, inputs, targets=None):
        """inputs [B, C·H·W] as dtrain's batches hold them, targets [B, 1] → (logits [B, 1, classes], loss)."""
        cfg = self.config
        B = inputs.shape[0]
        logits = self.scores(inputs.reshape(B, cfg["in_channels"], cfg["height"], cfg["width"]))
        loss = None
        if targets is not None:
            loss = nn.functional.cross_entropy(logits, targets.reshape(-1))
        return logits.reshape(B, 1, -1), loss

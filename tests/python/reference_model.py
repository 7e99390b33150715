# PyTorch reference of the model dtrain trains (docs/model.md), written out op by op so that
# parameter names equal the safetensors names and every step can be checked against the C++.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Defaults are the seed preset of docs/model.md (vocab_size has none: it comes from the data).
DEFAULT_CONFIG = {
    "seq_len": 32,
    "dim": 128,
    "heads": 4,
    "layers": 2,
    "ff_dim": 2048,
    "activation": "relu",
    "norm": "post",
    "positions": "sinusoidal",
    "final_norm": True,
    "tied": False,
    "head_bias": True,
    "dropout": 0.1,
    "causal": True,
    "ln_eps": 1e-5,
}
CONFIG_KEYS = ("vocab_size",) + tuple(DEFAULT_CONFIG)
_INT_KEYS = ("vocab_size", "seq_len", "dim", "heads", "layers", "ff_dim")
_FLOAT_KEYS = ("dropout", "ln_eps")
_BOOL_KEYS = ("final_norm", "tied", "head_bias", "causal")
_CHOICES = {"activation": ("relu", "gelu"), "norm": ("post", "pre"),
            "positions": ("sinusoidal", "learned")}


def _as_bool(key, v):
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ValueError(f"model config: {key} must be a boolean, got {v!r}")


def normalize_config(cfg):
    """Validate a config dict (docs/model.md keys), fill seed defaults, coerce types.
    Unknown keys are kept in the result's '_unknown' list so callers can report them."""
    if "vocab_size" not in cfg:
        raise ValueError("model config: vocab_size is required")
    out = dict(DEFAULT_CONFIG)
    unknown = []
    for k, v in cfg.items():
        if k not in CONFIG_KEYS:
            unknown.append(k)
            continue
        if k in _INT_KEYS:
            fv = float(v)
            if fv != int(fv):
                raise ValueError(f"model config: {k} must be an integer, got {v!r}")
            v = int(fv)
        elif k in _FLOAT_KEYS:
            v = float(v)
        elif k in _BOOL_KEYS:
            v = _as_bool(k, v)
        else:
            v = str(v)
        out[k] = v
    for k, allowed in _CHOICES.items():
        if out[k] not in allowed:
            raise ValueError(f"model config: {k} = {out[k]!r}, expected one of {allowed}")
    for k in _INT_KEYS:
        if out[k] <= 0:
            raise ValueError(f"model config: {k} must be positive, got {out[k]}")
    if out["dim"] % out["heads"] != 0:
        raise ValueError(f"model config: dim {out['dim']} is not divisible by heads {out['heads']}")
    if not 0.0 <= out["dropout"] < 1.0:
        raise ValueError(f"model config: dropout must be in [0, 1), got {out['dropout']}")
    out["_unknown"] = unknown
    out["_missing"] = [k for k in DEFAULT_CONFIG if k not in cfg]
    return out


def sinusoidal_table(seq_len, dim):
    """P[t, 2i] = sin(t / 10000^(2i/d)), P[t, 2i+1] = cos(t / 10000^(2i/d)); computed in f64."""
    t = torch.arange(seq_len, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)
    angle = t / torch.pow(10000.0, two_i / dim)
    p = torch.zeros(seq_len, dim, dtype=torch.float64)
    p[:, 0::2] = torch.sin(angle)
    p[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return p


class Linear(nn.Module):
    """y = x W^T + b with W [out, in] (PyTorch layout)."""

    def __init__(self, fan_in, fan_out, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
        self.bias = nn.Parameter(torch.empty(fan_out)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class LayerNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class Table(nn.Module):
    """A module holding just `weight` (embedding or learned positions)."""

    def __init__(self, rows, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, dim))


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout, causal):
        super().__init__()
        self.dim, self.heads, self.p, self.causal = dim, heads, dropout, causal
        self.qkv = Linear(dim, 3 * dim)
        self.out = Linear(dim, dim)

    def forward(self, z):
        B, T, d = z.shape
        H = self.heads
        hd = d // H
        qkv = self.qkv(z)  # [B, T, 3d]: q rows 0..d-1, k d..2d-1, v 2d..3d-1 of W
        q, k, v = qkv.split(d, dim=-1)
        q = q.reshape(B, T, H, hd).transpose(1, 2)  # [B, H, T, hd]; head h = columns h*hd..
        k = k.reshape(B, T, H, hd).transpose(1, 2)
        v = v.reshape(B, T, H, hd).transpose(1, 2)
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)  # [B, H, T, T]
        if self.causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=z.device).triu(1)  # s > t
            s = s.masked_fill(mask, float("-inf"))
        p = F.softmax(s, dim=-1)
        p = F.dropout(p, self.p, self.training)
        o = torch.matmul(p, v)  # [B, H, T, hd]
        o = o.transpose(1, 2).reshape(B, T, d)
        return self.out(o)


class FeedForward(nn.Module):
    def __init__(self, dim, ff_dim, activation, dropout):
        super().__init__()
        self.activation, self.p = activation, dropout
        self.fc1 = Linear(dim, ff_dim)
        self.fc2 = Linear(ff_dim, dim)

    def forward(self, z):
        a = self.fc1(z)
        a = F.relu(a) if self.activation == "relu" else F.gelu(a, approximate="tanh")
        a = F.dropout(a, self.p, self.training)
        return self.fc2(a)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["dim"]
        self.pre = cfg["norm"] == "pre"
        self.p = cfg["dropout"]
        self.attn = Attention(d, cfg["heads"], cfg["dropout"], cfg["causal"])
        self.norm1 = LayerNorm(d, cfg["ln_eps"])
        self.ff = FeedForward(d, cfg["ff_dim"], cfg["activation"], cfg["dropout"])
        self.norm2 = LayerNorm(d, cfg["ln_eps"])

    def _drop(self, x):
        return F.dropout(x, self.p, self.training)

    def forward(self, h):
        if self.pre:
            h = h + self._drop(self.attn(self.norm1(h)))
            h = h + self._drop(self.ff(self.norm2(h)))
        else:
            h = self.norm1(h + self._drop(self.attn(h)))
            h = self.norm2(h + self._drop(self.ff(h)))
        return h


class Head(nn.Module):
    """Output layer; holds `weight` unless tied and `bias` if head_bias."""

    def __init__(self, vocab, dim, tied, bias):
        super().__init__()
        self.weight = None if tied else nn.Parameter(torch.empty(vocab, dim))
        self.bias = nn.Parameter(torch.empty(vocab)) if bias else None



@torch.no_grad()
def load_strict(model, state_dict):
    """Copies state_dict into model's parameters; the names must be exactly the model's, with equal
    shapes (every reference model loads dtrain's weights this way)."""
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(params))
    bad_shape = [f"{n}: file {list(state_dict[n].shape)} vs model {list(p.shape)}"
                 for n, p in params.items() if n in state_dict and state_dict[n].shape != p.shape]
    if missing or unexpected or bad_shape:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if unexpected:
            parts.append(f"unexpected {unexpected}")
        if bad_shape:
            parts.append(f"shape mismatch {bad_shape}")
        raise ValueError("load_weights: " + "; ".join(parts))
    for n, p in params.items():
        p.copy_(state_dict[n].to(dtype=p.dtype))

class ReferenceLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        cfg = normalize_config(config)
        self.unknown_keys = cfg.pop("_unknown")
        self.missing_keys = cfg.pop("_missing")
        self.config = cfg
        V, T, d = cfg["vocab_size"], cfg["seq_len"], cfg["dim"]
        self.p = cfg["dropout"]
        self.embed = Table(V, d)
        if cfg["positions"] == "learned":
            self.pos = Table(T, d)
        else:
            self.pos = None
            self.register_buffer("pos_table", sinusoidal_table(T, d).float(), persistent=False)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg["layers"])])
        self.norm_f = LayerNorm(d, cfg["ln_eps"]) if cfg["final_norm"] else None
        self.head = Head(V, d, cfg["tied"], cfg["head_bias"])
        self.reset_parameters()

    # Initialisation of docs/model.md, drawn from torch's generator (not dtrain's Philox stream).
    @torch.no_grad()
    def reset_parameters(self, generator=None):
        def xavier(w):
            fan_out, fan_in = w.shape
            a = math.sqrt(6.0 / (fan_in + fan_out))
            w.uniform_(-a, a, generator=generator)

        def fan_in_uniform(b, fan_in):
            a = 1.0 / math.sqrt(fan_in)
            b.uniform_(-a, a, generator=generator)

        xavier(self.embed.weight)
        if self.pos is not None:
            xavier(self.pos.weight)
        for blk in self.blocks:
            xavier(blk.attn.qkv.weight)
            blk.attn.qkv.bias.zero_()
            xavier(blk.attn.out.weight)
            blk.attn.out.bias.zero_()
            xavier(blk.ff.fc1.weight)
            fan_in_uniform(blk.ff.fc1.bias, blk.ff.fc1.weight.shape[1])
            xavier(blk.ff.fc2.weight)
            fan_in_uniform(blk.ff.fc2.bias, blk.ff.fc2.weight.shape[1])
            for ln in (blk.norm1, blk.norm2):
                ln.weight.fill_(1.0)
                ln.bias.zero_()
        if self.norm_f is not None:
            self.norm_f.weight.fill_(1.0)
            self.norm_f.bias.zero_()
        if self.head.weight is not None:
            xavier(self.head.weight)
        if self.head.bias is not None:
            fan_in_uniform(self.head.bias, self.config["dim"])

    @torch.no_grad()
    def load_weights(self, state_dict):
        load_strict(self, state_dict)

    def forward(self, inputs, targets=None):
        inputs = inputs.long()
        B, T = inputs.shape
        if T > self.config["seq_len"]:
            raise ValueError(f"sequence length {T} exceeds seq_len {self.config['seq_len']}")
        pos = self.pos.weight[:T] if self.pos is not None else self.pos_table[:T]
        h = self.embed.weight[inputs] + pos
        h = F.dropout(h, self.p, self.training)
        for blk in self.blocks:
            h = blk(h)
        if self.norm_f is not None:
            h = self.norm_f(h)
        w = self.embed.weight if self.config["tied"] else self.head.weight
        logits = F.linear(h, w, self.head.bias)
        loss = None
        if targets is not None:
            V = logits.shape[-1]
            loss = F.cross_entropy(logits.reshape(-1, V), targets.long().reshape(-1))
        return logits, loss


def adamw_losses(model, inputs, targets, opt):
    """Trains `model` for len(inputs) AdamW steps (torch.optim.AdamW with the hyper-parameters of
    `opt`: lr, beta1, beta2, eps, weight_decay; constant lr) and returns each step's loss, measured
    before that step's update."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]),
                                  eps=opt["eps"], weight_decay=opt["weight_decay"])
    losses = []
    for s in range(len(inputs)):
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs[s], targets[s])
        losses.append(getattr(model, "reported_loss", loss).item())  # (a model whose objective adds terms)
        loss.backward()
        optimizer.step()
    return losses

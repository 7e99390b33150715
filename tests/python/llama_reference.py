#!/usr/bin/python3
# The Llama-style decoder in plain PyTorch (Debian's torch 1.13, no `transformers`), written the
# way Hugging Face's Llama computes: RMSNorm in f32, rotate-half RoPE with f32 angles, grouped-query
# attention by repeating the kv heads, SwiGLU, no biases; parameters under Hugging Face's names, so
# dtrain's weights load by name. Used by parity.py for model.kind = llama dumps.
import math

import torch
from torch import nn

from reference_model import load_strict


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(T, hd, theta):
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = torch.outer(torch.arange(T, dtype=torch.int64).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, H, K = cfg["dim"], cfg["heads"], cfg["kv_heads"]
        self.H, self.K, self.hd = H, K, d // H
        self.q_proj = nn.Linear(d, H * self.hd, bias=False)
        self.k_proj = nn.Linear(d, K * self.hd, bias=False)
        self.v_proj = nn.Linear(d, K * self.hd, bias=False)
        self.o_proj = nn.Linear(H * self.hd, d, bias=False)
        self.causal = cfg["causal"]

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.K, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.K, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        g = self.H // self.K  # repeat_kv
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        if self.causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.H * self.hd))


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg, f):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["dim"], cfg["norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["dim"], cfg["norm_eps"])
        self.mlp = MLP(cfg["dim"], f)

    def forward(self, h, cos, sin):
        h = h + self.self_attn(self.input_layernorm(h), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class Body(nn.Module):
    def __init__(self, cfg, f):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        self.layers = nn.ModuleList([Layer(cfg, f) for _ in range(cfg["layers"])])
        self.norm = RMSNorm(cfg["dim"], cfg["norm_eps"])


class ReferenceLlama(nn.Module):
    """dtrain's model.kind = llama; config: the checkpoint's model JSON. A kind built on it (moe) gives
    its own KEYS, NAME and make_body()."""

    KEYS = ("kind", "vocab_size", "seq_len", "dim", "heads", "kv_heads", "layers", "ff_dim", "rope_theta",
            "norm_eps", "tied", "dropout", "causal")
    NAME = "llama"

    def __init__(self, config):
        super().__init__()
        cfg = dict(config)
        self.unknown_keys = sorted(k for k in cfg if k not in self.KEYS)
        self.missing_keys = sorted(k for k in self.KEYS if k not in cfg)
        if self.missing_keys:
            raise ValueError(f"{self.NAME} config lacks {self.missing_keys}")
        if cfg["kv_heads"] == 0:
            cfg["kv_heads"] = cfg["heads"]
        d = cfg["dim"]
        f = cfg["ff_dim"] if cfg["ff_dim"] > 0 else (8 * d // 3 + 255) // 256 * 256
        self.config = cfg
        self.model = self.make_body(cfg, f)
        self.lm_head = None if cfg["tied"] else nn.Linear(d, cfg["vocab_size"], bias=False)

    def make_body(self, cfg, f):
        """The embedding, the decoder layers (dense SwiGLU of width f) and the final norm."""
        return Body(cfg, f)

    def load_weights(self, state_dict):
        load_strict(self, state_dict)

    def forward(self, inputs, targets=None):
        B, T = inputs.shape
        cos, sin = rope_cos_sin(T, self.config["dim"] // self.config["heads"], self.config["rope_theta"])
        cos, sin = cos.to(inputs.device), sin.to(inputs.device)  # computed on the CPU, in float32
        h = self.model.embed_tokens(inputs)
        for layer in self.model.layers:
            h = layer(h, cos, sin)
        h = self.model.norm(h)
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = h @ w.t()
        loss = None
        if targets is not None:
            loss = nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
        return logits, loss

#!/usr/bin/python3
# The mixture-of-experts decoder (model.kind = moe) in plain PyTorch: the Llama-style decoder of
# llama_reference.py whose feed-forward is, in every moe_every-th layer, a router over `experts`
# SwiGLU experts of which each token takes top_k (Qwen3-MoE's computation and Hugging Face names:
# model.layers.N.mlp.gate.weight, model.layers.N.mlp.experts.M.{gate,up,down}_proj.weight). Ties in
# the top-k go to the lower expert index. forward's loss is the training objective (cross-entropy plus
# the weighted balance loss); reported_loss is the cross-entropy alone, the loss dtrain reports.
# The auxiliary load-balancing loss is sequence-wise (DeepSeek-V3's form, Switch's for top_k = 1):
# per sample, E / (k·T) · Σ_e count_e · P_e, count_e the sample's tokens routed to e, P_e the mean of
# its tokens' normalised router scores; averaged over samples and MoE layers, times aux_loss_coef.
import torch
from torch import nn

from llama_reference import MLP, RMSNorm, Attention, rope_cos_sin
from reference_model import load_strict


def top_k_by_index(scores, k):
    """Indices of the k largest scores per row, ties to the lower index, in descending order."""
    E = scores.shape[-1]
    # a stable sort on -score keeps equal scores in index order
    order = torch.sort(-scores, dim=-1, stable=True).indices
    assert order.shape[-1] == E
    return order[..., :k]


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, E, f = cfg["dim"], cfg["experts"], cfg["expert_width"]
        self.E, self.k = E, cfg["top_k"]
        self.router, self.norm_topk = cfg["router"], cfg["norm_topk"]
        self.gate = nn.Linear(d, E, bias=False)
        self.experts = nn.ModuleList([MLP(d, f) for _ in range(E)])

    def forward(self, x):
        """x [B, T, d] -> (y [B, T, d], the layer's auxiliary loss before its coefficient)."""
        B, T, d = x.shape
        logits = self.gate(x)
        scores = torch.softmax(logits, dim=-1) if self.router == "softmax" else torch.sigmoid(logits)
        chosen = top_k_by_index(scores.detach(), self.k)            # [B, T, k]
        w = scores.gather(-1, chosen)
        if self.norm_topk:
            w = w / w.sum(-1, keepdim=True)
        flat, y = x.reshape(-1, d), torch.zeros(B * T, d, dtype=x.dtype)
        idx, wf = chosen.reshape(-1, self.k), w.reshape(-1, self.k)
        for e in range(self.E):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel():
                y.index_add_(0, rows, wf[rows, slot].unsqueeze(-1) * self.experts[e](flat[rows]))
        y = y.view(B, T, d)
        # sequence-wise balance: counts are not differentiated, the mean normalised scores are
        counts = torch.zeros(B, self.E).scatter_add_(1, chosen.reshape(B, -1),
                                                     torch.ones(B, T * self.k)).detach()
        norm = scores if self.router == "softmax" else scores / scores.sum(-1, keepdim=True)
        P = norm.mean(dim=1)                                          # [B, E]
        aux = (self.E / (self.k * T) * (counts * P).sum(-1)).mean()
        return y, aux


class Layer(nn.Module):
    def __init__(self, cfg, dense_ff, sparse):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["dim"], cfg["norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["dim"], cfg["norm_eps"])
        self.mlp = MoE(cfg) if sparse else MLP(cfg["dim"], dense_ff)
        self.sparse = sparse

    def forward(self, h, cos, sin):
        h = h + self.self_attn(self.input_layernorm(h), cos, sin)
        if not self.sparse:
            return h + self.mlp(self.post_attention_layernorm(h)), None
        y, aux = self.mlp(self.post_attention_layernorm(h))
        return h + y, aux


class Body(nn.Module):
    def __init__(self, cfg, dense_ff):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        step = cfg["moe_every"]
        self.layers = nn.ModuleList([Layer(cfg, dense_ff, (i + 1) % step == 0) for i in range(cfg["layers"])])
        self.norm = RMSNorm(cfg["dim"], cfg["norm_eps"])


class ReferenceMoE(nn.Module):
    """dtrain's model.kind = moe; config: the checkpoint's model JSON."""

    KEYS = ("kind", "vocab_size", "seq_len", "dim", "heads", "kv_heads", "layers", "ff_dim", "rope_theta",
            "norm_eps", "tied", "dropout", "causal", "experts", "top_k", "expert_ff", "moe_every", "router",
            "norm_topk", "aux_loss_coef")

    def __init__(self, config):
        super().__init__()
        cfg = dict(config)
        self.unknown_keys = sorted(k for k in cfg if k not in self.KEYS)
        self.missing_keys = sorted(k for k in self.KEYS if k not in cfg)
        if self.missing_keys:
            raise ValueError(f"moe config lacks {self.missing_keys}")
        if cfg["kv_heads"] == 0:
            cfg["kv_heads"] = cfg["heads"]
        d = cfg["dim"]
        f = cfg["ff_dim"] if cfg["ff_dim"] > 0 else (8 * d // 3 + 255) // 256 * 256
        cfg["expert_width"] = cfg["expert_ff"] if cfg["expert_ff"] > 0 else max(16, f // cfg["top_k"] // 16 * 16)
        self.config = cfg
        self.model = Body(cfg, f)
        self.lm_head = None if cfg["tied"] else nn.Linear(d, cfg["vocab_size"], bias=False)

    def load_weights(self, state_dict):
        load_strict(self, state_dict)

    def forward(self, inputs, targets=None):
        """-> (logits, loss): the loss is the cross-entropy plus aux_loss_coef times the auxiliary
        loss averaged over the MoE layers (self.aux_loss keeps that average, before its coefficient)."""
        B, T = inputs.shape
        cos, sin = rope_cos_sin(T, self.config["dim"] // self.config["heads"], self.config["rope_theta"])
        h = self.model.embed_tokens(inputs)
        auxes = []
        for layer in self.model.layers:
            h, aux = layer(h, cos, sin)
            if aux is not None:
                auxes.append(aux)
        h = self.model.norm(h)
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = h @ w.t()
        self.aux_loss = torch.stack(auxes).mean() if auxes else torch.zeros(())
        loss = None
        if targets is not None:
            ce = nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
            self.reported_loss = ce.detach()
            loss = ce + self.config["aux_loss_coef"] * self.aux_loss
        return logits, loss

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
# With a capacity factor, an expert takes at most ceil(factor · T · k / E) token copies of a sample,
# the first in token order (then choice order); a dropped copy adds nothing (the others' weights are
# not renormalised). A shared expert (shared_ff > 0, DeepSeek's shared_experts) runs on every token.
import math

import torch
from torch import nn

from llama_reference import MLP, RMSNorm, Attention, ReferenceLlama


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
        self.capacity_factor = cfg["capacity_factor"]
        self.gate = nn.Linear(d, E, bias=False)
        self.experts = nn.ModuleList([MLP(d, f) for _ in range(E)])
        self.shared_experts = MLP(d, cfg["shared_ff"]) if cfg["shared_ff"] > 0 else None

    def kept(self, chosen, T):
        """[B, T, k] bool: the copies the capacity keeps (all of them without one)."""
        if self.capacity_factor <= 0:
            return torch.ones_like(chosen, dtype=torch.bool)
        B, k = chosen.shape[0], self.k
        cap = math.ceil(float(torch.tensor(self.capacity_factor, dtype=torch.float32)) * T * k / self.E)
        onehot = nn.functional.one_hot(chosen.reshape(B, T * k), self.E)  # token order, then choice order
        place = (onehot.cumsum(1) * onehot).sum(-1)                        # 1 for an expert's first copy
        return (place <= cap).reshape(B, T, k)

    def forward(self, x):
        """x [B, T, d] -> y [B, T, d]; self.aux: the layer's auxiliary loss before its coefficient."""
        B, T, d = x.shape
        logits = self.gate(x)
        scores = torch.softmax(logits, dim=-1) if self.router == "softmax" else torch.sigmoid(logits)
        chosen = top_k_by_index(scores.detach(), self.k)            # [B, T, k]
        w = scores.gather(-1, chosen)
        if self.norm_topk:
            w = w / w.sum(-1, keepdim=True)
        flat, y = x.reshape(-1, d), torch.zeros(B * T, d, dtype=x.dtype)
        idx, wf = chosen.reshape(-1, self.k), w.reshape(-1, self.k)
        kept = self.kept(chosen, T).reshape(-1, self.k)
        self.dropped = int((~kept).sum())
        for e in range(self.E):
            rows, slot = ((idx == e) & kept).nonzero(as_tuple=True)
            if rows.numel():
                y.index_add_(0, rows, wf[rows, slot].unsqueeze(-1) * self.experts[e](flat[rows]))
        y = y.view(B, T, d)
        if self.shared_experts is not None:
            y = y + self.shared_experts(x)
        # sequence-wise balance: counts are not differentiated, the mean normalised scores are
        counts = torch.zeros(B, self.E).scatter_add_(1, chosen.reshape(B, -1),
                                                     torch.ones(B, T * self.k)).detach()
        norm = scores if self.router == "softmax" else scores / scores.sum(-1, keepdim=True)
        P = norm.mean(dim=1)                                          # [B, E]
        self.aux = (self.E / (self.k * T) * (counts * P).sum(-1)).mean()
        return y


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
        return h + self.mlp(self.post_attention_layernorm(h))


class Body(nn.Module):
    def __init__(self, cfg, dense_ff):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        step = cfg["moe_every"]
        self.layers = nn.ModuleList([Layer(cfg, dense_ff, (i + 1) % step == 0) for i in range(cfg["layers"])])
        self.norm = RMSNorm(cfg["dim"], cfg["norm_eps"])


class ReferenceMoE(ReferenceLlama):
    """dtrain's model.kind = moe; config: the checkpoint's model JSON."""

    KEYS = ReferenceLlama.KEYS + ("experts", "top_k", "expert_ff", "moe_every", "router", "norm_topk",
                                  "aux_loss_coef", "capacity_factor", "shared_ff")
    NAME = "moe"

    def make_body(self, cfg, f):
        cfg["expert_width"] = cfg["expert_ff"] if cfg["expert_ff"] > 0 else max(16, f // cfg["top_k"] // 16 * 16)
        return Body(cfg, f)

    def forward(self, inputs, targets=None):
        """-> (logits, loss): the loss is the cross-entropy plus aux_loss_coef times the auxiliary
        loss averaged over the MoE layers (self.aux_loss keeps that average, before its coefficient)."""
        logits, ce = super().forward(inputs, targets)
        auxes = [layer.mlp.aux for layer in self.model.layers if layer.sparse]
        self.aux_loss = torch.stack(auxes).mean() if auxes else torch.zeros(())
        if ce is None:
            return logits, None
        self.reported_loss = ce.detach()
        return logits, ce + self.config["aux_loss_coef"] * self.aux_loss

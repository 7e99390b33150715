# Rotary position embedding as Hugging Face's Llama computes it (LlamaRotaryEmbedding's default
# rope and apply_rotary_pos_emb, float32 throughout), on packed qkv rows [q | k | v] as dtrain's
# rope_forward takes them; tests/unit/test_rope.cpp compares the two.
# usage: rope_reference.py B T HEADS KV_HEADS HEAD_DIM THETA FIRST_POSITION IN.f32 OUT.f32
# (IN and OUT: raw little-endian float32 [B*T, (HEADS + 2*KV_HEADS)*HEAD_DIM])
import sys

import numpy as np
import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def main():
    B, T, H, K, hd = (int(a) for a in sys.argv[1:6])
    theta, first = float(sys.argv[6]), int(sys.argv[7])
    qkv = torch.from_numpy(np.fromfile(sys.argv[8], dtype=np.float32)).reshape(B, T, (H + 2 * K) * hd)
    # LlamaRotaryEmbedding (rope_type "default", attention_scaling 1)
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    position_ids = torch.arange(first, first + T, dtype=torch.int64)[None, :].expand(B, T)
    inv_freq_expanded = inv_freq[None, :, None].float().expand(B, -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    # apply_rotary_pos_emb on [B, heads, T, hd]
    q = qkv[..., : H * hd].reshape(B, T, H, hd).transpose(1, 2)
    k = qkv[..., H * hd : (H + K) * hd].reshape(B, T, K, hd).transpose(1, 2)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    out = qkv.clone()
    out[..., : H * hd] = q_embed.transpose(1, 2).reshape(B, T, H * hd)
    out[..., H * hd : (H + K) * hd] = k_embed.transpose(1, 2).reshape(B, T, K * hd)
    out.contiguous().numpy().tofile(sys.argv[9])


if __name__ == "__main__":
    main()

// Ring attention (see ring_attention.hpp).
#include "parallel/cp/ring_attention.hpp"

#include <chrono>

#include "core/phase_clock.hpp"

namespace dtrain {

namespace {
enum Tag : uint32_t { kForwardBlock = 0x43500001u, kBackwardBlock = 0x43500002u, kBlockGrad = 0x43500003u };
}  // namespace

void RingAttention::size_buffers(const AttentionShape& s) {
  block_floats_ = s.B * s.T * 2 * s.kv() * s.Dh;
  for (auto* v : {&kv_[0], &kv_[1], &dkv_[0], &dkv_[1], &dkv_in_}) grown(*v, block_floats_);
  const int64_t rows = s.B * s.H * s.T;
  grown(stats_rows_, 2 * rows);
  grown(delta_, rows);
}

WorkPtr RingAttention::send(const float* data, int64_t floats, uint32_t tag) {
  stats_.bytes += floats * int64_t(sizeof(float));
  ++stats_.transfers;
  return group_.send_async(data, size_t(floats) * sizeof(float), (group_.rank() + 1) % group_.size(), tag);
}

WorkPtr RingAttention::recv(float* data, int64_t floats, uint32_t tag) {
  return group_.recv_async(data, size_t(floats) * sizeof(float), (group_.rank() + group_.size() - 1) % group_.size(),
                           tag);
}

void RingAttention::wait(const WorkPtr& w) {
  if (!w) return;
  const auto t = std::chrono::steady_clock::now();
  w->wait();
  stats_.wait_seconds += seconds_since(t);
}

// Step k attends to the block that started k ranks back; the next block travels meanwhile.
void RingAttention::forward(const float* qkv, float* out, float* saved, const AttentionShape& s,
                            const DropoutSpec& drop, const SequenceShard& sequence) {
  size_buffers(s);
  const AttentionBlocks a{s, sequence};
  const int n = group_.size(), me = group_.rank();
  dev_.kv_block_pack(qkv, kv_[0].data(), s);
  for (int k = 0, cur = 0; k < n; ++k, cur ^= 1) {
    WorkPtr sent, got;
    if (k + 1 < n) {
      sent = send(kv_[cur].data(), block_floats_, kForwardBlock);
      got = recv(kv_[cur ^ 1].data(), block_floats_, kForwardBlock);
    }
    const auto t = std::chrono::steady_clock::now();
    dev_.attention_block_forward(qkv, kv_[cur].data(), shard_of(sequence, (me - k + n) % n), out, stats_rows_.data(),
                                 a, drop, k == 0);
    stats_.attention_seconds += seconds_since(t);
    wait(sent);
    wait(got);
  }
  dev_.attention_blocks_finish(out, stats_rows_.data(), saved, a);
}

// Step k: this rank's share of the gradient of the block that started k ranks back, added to what
// the ranks before it gathered (arriving meanwhile), and sent on; after the last step each block's
// whole gradient reaches its owner.
void RingAttention::backward(const float* dout, const float* qkv, const float* out, const float* saved, float* dqkv,
                             const AttentionShape& s, const DropoutSpec& drop, const SequenceShard& sequence) {
  size_buffers(s);
  const AttentionBlocks a{s, sequence};
  const int n = group_.size(), me = group_.rank();
  dev_.attention_blocks_delta(dout, out, delta_.data(), a);
  dev_.kv_block_pack(qkv, kv_[0].data(), s);
  WorkPtr grad_sent;
  for (int k = 0, cur = 0; k < n; ++k, cur ^= 1) {
    WorkPtr sent, got, gathered;
    if (k + 1 < n) {
      sent = send(kv_[cur].data(), block_floats_, kBackwardBlock);
      got = recv(kv_[cur ^ 1].data(), block_floats_, kBackwardBlock);
    }
    if (k > 0) gathered = recv(dkv_in_.data(), block_floats_, kBlockGrad);
    float* mine = dkv_[k % 2].data();  // its send of two steps ago was waited for at the last step
    dev_.zero(mine, sizeof(float) * size_t(block_floats_));
    const auto t = std::chrono::steady_clock::now();
    dev_.attention_block_backward(dout, qkv, kv_[cur].data(), shard_of(sequence, (me - k + n) % n), saved,
                                  delta_.data(), dqkv, mine, a, drop, k == 0);
    stats_.attention_seconds += seconds_since(t);
    if (gathered) {
      wait(gathered);
      dev_.add(mine, dkv_in_.data(), mine, block_floats_);
    }
    wait(grad_sent);
    grad_sent = send(mine, block_floats_, kBlockGrad);
    wait(sent);
    wait(got);
  }
  WorkPtr own = recv(dkv_in_.data(), block_floats_, kBlockGrad);
  wait(own);
  wait(grad_sent);
  dev_.kv_block_unpack(dkv_in_.data(), dqkv, s);
}

}  // namespace dtrain

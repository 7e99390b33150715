// Rotary position embedding: the forward against double-precision rotate-half references, the
// backward against finite differences and as the forward's transpose, positions, the v part, the
// thread count, and (when /usr/bin/python3 has torch) Hugging Face's own formula.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kernel_test_util.hpp"
#include "kernels/cpu/rope.hpp"

namespace {

// The rotate-half rotation in double of every q and k head of packed qkv, by angle(p, i).
template <class Angle>
DVec ref_rope(const Vec& qkv, const RopeShape& s, Angle angle) {
  const int64_t hd = s.head_dim, half = hd / 2, width = s.row_width();
  DVec out(qkv.begin(), qkv.end());
  for (int64_t r = 0; r < s.B * s.T; ++r) {
    const int64_t p = s.first_position + r % s.T;
    for (int64_t h = 0; h < s.heads + s.kv(); ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t at = r * width + h * hd + i;
        const double a = qkv[at], b = qkv[at + half], c = std::cos(angle(p, i)), sn = std::sin(angle(p, i));
        out[at] = a * c - b * sn;
        out[at + half] = b * c + a * sn;
      }
  }
  return out;
}

// The exact angle p * theta^(-2i/hd), in double.
DVec ref_exact(const Vec& qkv, const RopeShape& s) {
  return ref_rope(qkv, s, [&](int64_t p, int64_t i) {
    return double(p) * std::pow(double(s.theta), -double(2 * i) / double(s.head_dim));
  });
}

// The documented float32 angle (Hugging Face's), its cos and sin in double.
DVec ref_f32_angle(const Vec& qkv, const RopeShape& s) {
  return ref_rope(qkv, s, [&](int64_t p, int64_t i) {
    return double(float(p) * rope_inv_freq(i, s.head_dim, s.theta));
  });
}

RopeShape shape(int64_t B, int64_t T, int64_t H, int64_t K, int64_t hd, float theta = 10000.0f, int64_t first = 0) {
  RopeShape s;
  s.B = B;
  s.T = T;
  s.heads = H;
  s.kv_heads = K;
  s.head_dim = hd;
  s.theta = theta;
  s.first_position = first;
  return s;
}

Vec rope(Vec x, const RopeShape& s) {
  rope_forward(x.data(), s);
  return x;
}
Vec rope_t(Vec x, const RopeShape& s) {
  rope_backward(x.data(), s);
  return x;
}

}  // namespace

TEST(Rope, ForwardMatchesRotateHalfReference) {
  std::mt19937 g(70);
  // multi-head (kv_heads 0 and = heads), grouped-query, multi-query; theta of Llama 2 and 3
  for (const RopeShape& s : {shape(2, 7, 3, 0, 8), shape(2, 7, 3, 3, 8), shape(3, 5, 4, 2, 16, 500000.0f),
                             shape(1, 9, 4, 1, 6, 10000.0f, 2)}) {
    SCOPED_TRACE("heads " + std::to_string(s.heads) + ", kv " + std::to_string(s.kv_heads) + ", hd " +
                 std::to_string(s.head_dim));
    const Vec x = randu(s.B * s.T * s.row_width(), g, -2.0f, 2.0f);
    const Vec y = rope(x, s);
    // positions below 16: the float32 angle is within 16 * 2^-24 of the exact one
    expect_close(y, ref_exact(x, s), 1e-5, 1e-5, "rope vs exact angles");
    expect_close(y, ref_f32_angle(x, s), 1e-6, 1e-6, "rope vs float32 angles");
  }
}

// Far along the sequence the float32 angle (what Hugging Face computes, and so what its models
// were trained with) is off the exact angle by up to half an ulp of the angle: the kernel follows
// the float32 angle closely, and the exact angle only loosely.
TEST(Rope, LargePositionsFollowTheFloat32Angle) {
  std::mt19937 g(71);
  const RopeShape s = shape(1, 6, 2, 1, 8, 10000.0f, 30000);
  const Vec x = randu(s.B * s.T * s.row_width(), g, -1.0f, 1.0f);
  const Vec y = rope(x, s);
  expect_close(y, ref_f32_angle(x, s), 1e-6, 1e-6, "rope vs float32 angles");
  const DVec exact = ref_exact(x, s);
  double worst = 0.0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - exact[i]));
  EXPECT_GT(worst, 1e-5) << "float32 angles at position 30000 should be visibly off the exact ones";
  EXPECT_LT(worst, 1e-2);
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  std::mt19937 g(72);
  const RopeShape s = shape(2, 4, 4, 2, 6, 10000.0f, 5);
  Vec x = randu(s.B * s.T * s.row_width(), g);
  const Vec w = randu(x.size(), g);  // f(x) = <w, rope(x)>, so df/dx = rope_backward(w)
  const DVec num = numeric_grad(x, [&] { return dot(w, rope(x, s)); }, 1e-2f);
  expect_grad(rope_t(w, s), num, 1e-3, "rope backward");
}

// The rotation is orthogonal and rope_backward is its transpose: <R x, y> = <x, Rᵀ y>, Rᵀ R x = x.
TEST(Rope, BackwardIsTheTransposeAndTheInverse) {
  std::mt19937 g(73);
  const RopeShape s = shape(3, 11, 4, 2, 16, 500000.0f, 100);
  const Vec x = randu(s.B * s.T * s.row_width(), g), y = randu(x.size(), g);
  const double lhs = dot(rope(x, s), y), rhs = dot(x, rope_t(y, s));
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::fabs(lhs) + 1e-5);
  expect_close(rope_t(rope(x, s), s), x, 1e-6, 1e-6, "backward(forward(x))");
  EXPECT_NE(rope(x, s), x);
}

// Row r is at position first_position + r % T: a call for positions 3.. gives exactly the rows
// 3.. of a call from 0, in every sample.
TEST(Rope, FirstPositionShiftsExactly) {
  std::mt19937 g(74);
  const RopeShape whole = shape(1, 12, 2, 2, 8), tail = shape(2, 9, 2, 2, 8, 10000.0f, 3);
  const int64_t width = whole.row_width();
  const Vec x = randu(whole.T * width, g);
  const Vec y = rope(x, whole), yb = rope_t(x, whole);
  Vec xt, yt, ybt;  // the tail rows 3..11, twice (two samples)
  for (int b = 0; b < 2; ++b) {
    xt.insert(xt.end(), x.begin() + 3 * width, x.end());
    yt.insert(yt.end(), y.begin() + 3 * width, y.end());
    ybt.insert(ybt.end(), yb.begin() + 3 * width, yb.end());
  }
  EXPECT_EQ(rope(xt, tail), yt);
  EXPECT_EQ(rope_t(xt, tail), ybt);
  // position 0 is the identity: the first row is untouched
  EXPECT_TRUE(std::equal(x.begin(), x.begin() + width, y.begin()));
  EXPECT_FALSE(std::equal(x.begin() + width, x.begin() + 2 * width, y.begin() + width));
}

TEST(Rope, VIsUntouchedAndQAndKRotate) {
  std::mt19937 g(75);
  const RopeShape s = shape(2, 5, 6, 2, 4, 10000.0f, 1);
  const int64_t width = s.row_width(), qk = (s.heads + s.kv()) * s.head_dim;
  const Vec x = randu(s.B * s.T * width, g);
  for (const Vec& y : {rope(x, s), rope_t(x, s)})
    for (int64_t r = 0; r < s.B * s.T; ++r) {
      const auto row = x.begin() + r * width, out = y.begin() + r * width;
      EXPECT_TRUE(std::equal(row + qk, row + width, out + qk)) << "v of row " << r;
      for (int64_t h = 0; h < s.heads + s.kv(); ++h)  // every q and k head moves (every position is > 0)
        EXPECT_FALSE(std::equal(row + h * s.head_dim, row + (h + 1) * s.head_dim, out + h * s.head_dim))
            << "head " << h << " of row " << r;
    }
}

TEST(Rope, SameForOneAndTwoThreads) {
  std::mt19937 g(76);
  const RopeShape s = shape(4, 33, 4, 2, 32, 10000.0f, 7);
  const Vec x = randu(s.B * s.T * s.row_width(), g);
  Vec y1, y2, b1, b2;
  {
    Threads t(1);
    y1 = rope(x, s);
    b1 = rope_t(x, s);
  }
  {
    Threads t(2);
    y2 = rope(x, s);
    b2 = rope_t(x, s);
  }
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(b1, b2);
}

TEST(Rope, OddHeadDimIsRefused) {
  Vec x(3 * 5, 1.0f);
  EXPECT_THROW(rope_forward(x.data(), shape(1, 1, 1, 1, 5)), std::logic_error);
  EXPECT_THROW(rope_backward(x.data(), shape(1, 1, 1, 1, 5)), std::logic_error);
}

// Hugging Face's LlamaRotaryEmbedding and apply_rotary_pos_emb in torch (tests/python/rope_reference.py),
// float32 as there: the same numbers to float32 rounding of cos and sin, even far along the sequence.
TEST(Rope, MatchesHuggingFaceInTorch) {
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no torch (install python3-torch)";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dtrain_rope_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 g(77);
  for (const RopeShape& s : {shape(2, 16, 4, 2, 64, 10000.0f, 0), shape(1, 8, 2, 1, 128, 500000.0f, 4090),
                             shape(2, 5, 3, 3, 128, 10000.0f, 2040)}) {
    SCOPED_TRACE("hd " + std::to_string(s.head_dim) + ", theta " + std::to_string(s.theta) + ", first position " +
                 std::to_string(s.first_position));
    const Vec x = randu(s.B * s.T * s.row_width(), g, -2.0f, 2.0f);
    const fs::path in = dir / "in.f32", out = dir / "out.f32";
    std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(x.data()), std::streamsize(4 * x.size()));
    const std::string cmd = "/usr/bin/python3 " + std::string(DTRAIN_SOURCE_DIR) + "/tests/python/rope_reference.py " +
                            std::to_string(s.B) + " " + std::to_string(s.T) + " " + std::to_string(s.heads) + " " +
                            std::to_string(s.kv()) + " " + std::to_string(s.head_dim) + " " +
                            std::to_string(s.theta) + " " + std::to_string(s.first_position) + " " + in.string() +
                            " " + out.string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    Vec want(x.size());
    std::ifstream f(out, std::ios::binary);
    f.read(reinterpret_cast<char*>(want.data()), std::streamsize(4 * want.size()));
    ASSERT_EQ(f.gcount(), std::streamsize(4 * want.size()));
    expect_close(rope(x, s), want, 0.0, 1e-6, "rope vs Hugging Face");
  }
  fs::remove_all(dir);
}

// Context parallel: rows holding two runs of positions (SequenceShard) rotate as those positions of
// the whole sequence do.
TEST(Rope, SequenceShardRotatesByGlobalPositions) {
  std::mt19937 g(72);
  RopeShape whole = shape(2, 12, 4, 2, 8);
  const Vec x = randu(whole.B * whole.T * whole.row_width(), g, -1.0f, 1.0f);
  const Vec all = rope(x, whole);
  const SequenceShard shard{12, 3, 3, 6};  // cp 2, rank 1: chunks 1 and 2 of 4
  RopeShape part = whole;
  part.T = 6;
  part.sequence = shard;
  const int64_t w = whole.row_width();
  Vec local(size_t(whole.B * part.T * w));
  for (int64_t b = 0; b < whole.B; ++b)
    for (int64_t t = 0; t < part.T; ++t)
      std::copy_n(x.begin() + (b * whole.T + shard.position(t)) * w, w, local.begin() + (b * part.T + t) * w);
  const Vec y = rope(local, part);
  for (int64_t b = 0; b < whole.B; ++b)
    for (int64_t t = 0; t < part.T; ++t)
      for (int64_t i = 0; i < w; ++i)
        ASSERT_EQ(y[size_t((b * part.T + t) * w + i)], all[size_t((b * whole.T + shard.position(t)) * w + i)])
            << "sample " << b << " position " << t << " column " << i;
  const Vec back = rope_t(y, part);
  expect_close(back, local, 1e-6, 1e-6, "inverse");
}

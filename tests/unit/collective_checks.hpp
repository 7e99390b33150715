// Collective checks shared by the Gloo and MPI tests: each runs on every rank of a group and throws
// (RANK_CHECK) when an operation's result is not what it must be.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/process_group.hpp"
#include "comm_test_util.hpp"
#include "core/bf16.hpp"

namespace dist_test {

using dtrain::ElemType;
using dtrain::ReduceOp;
using dtrain::reduce_op_name;

// Value rank r contributes at element i (distinct per rank and element, exact in float).
inline float val(int r, size_t i) { return float((i % 97) * 4 + size_t(r) + 1); }

inline void check_allreduce(dtrain::ProcessGroup& g, size_t n) {
  const int P = g.size(), r = g.rank();
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = val(r, i);
  auto y = x;
  g.allreduce(x.data(), n, ReduceOp::sum);
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int q = 0; q < P; ++q) want += val(q, i);
    RANK_CHECK(x[i] == want, "sum n=" + std::to_string(n) + " i=" + std::to_string(i));
  }
  auto z = y;
  g.allreduce(y.data(), n, ReduceOp::max);
  g.allreduce(z.data(), n, ReduceOp::min);
  for (size_t i = 0; i < n; ++i) {
    RANK_CHECK(y[i] == val(P - 1, i), "max");
    RANK_CHECK(z[i] == val(0, i), "min");
  }
  std::vector<double> d(n, double(r));
  g.allreduce(d.data(), n, ReduceOp::avg);
  for (size_t i = 0; i < n; ++i) RANK_CHECK(std::abs(d[i] - (P - 1) / 2.0) < 1e-12, "avg");
  std::vector<int64_t> c(n, int64_t(1) << (33 + r % 3));
  g.allreduce(c.data(), n, ReduceOp::sum);
  int64_t want = 0;
  for (int q = 0; q < P; ++q) want += int64_t(1) << (33 + q % 3);
  for (size_t i = 0; i < n; ++i) RANK_CHECK(c[i] == want, "i64 sum");
}

inline void check_gather_scatter(dtrain::ProcessGroup& g) {
  const int P = g.size(), r = g.rank();
  // equal allgather
  const size_t n = 1001;
  std::vector<float> mine(n), all(n * size_t(P));
  for (size_t i = 0; i < n; ++i) mine[i] = val(r, i);
  g.allgather(mine.data(), all.data(), n, ElemType::f32);
  for (int q = 0; q < P; ++q)
    for (size_t i = 0; i < n; ++i) RANK_CHECK(all[size_t(q) * n + i] == val(q, i), "allgather");
  // uneven allgather (rank q has q*3+1 elements, rank 1 has 0 when P > 2)
  std::vector<size_t> counts(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) counts[size_t(q)] = (P > 2 && q == 1) ? 0 : size_t(q) * 3 + 1;
  std::vector<float> part(counts[size_t(r)]);
  for (size_t i = 0; i < part.size(); ++i) part[i] = val(r, i);
  std::vector<float> gathered(std::accumulate(counts.begin(), counts.end(), size_t(0)) + 1);
  g.allgather_async(part.data(), gathered.data(), counts, ElemType::f32)->wait();
  size_t off = 0;
  for (int q = 0; q < P; ++q)
    for (size_t i = 0; i < counts[size_t(q)]; ++i) RANK_CHECK(gathered[off++] == val(q, i), "allgatherv");
  // reduce-scatter with uneven shares (including an empty one)
  std::vector<size_t> shares(static_cast<size_t>(P));
  for (int q = 0; q < P; ++q) shares[size_t(q)] = (P > 2 && q == 2) ? 0 : size_t(1000 + 37 * q);
  const size_t total = std::accumulate(shares.begin(), shares.end(), size_t(0));
  std::vector<float> in(total), out(shares[size_t(r)] + 1);
  for (size_t i = 0; i < total; ++i) in[i] = val(r, i);
  for (auto op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    g.reduce_scatter_async(in.data(), out.data(), shares, ElemType::f32, op)->wait();
    size_t start = 0;
    for (int q = 0; q < r; ++q) start += shares[size_t(q)];
    for (size_t i = 0; i < shares[size_t(r)]; ++i) {
      float s = 0, m = 0;
      for (int q = 0; q < P; ++q) {
        s += val(q, start + i);
        m = std::max(m, val(q, start + i));
      }
      const float want = op == ReduceOp::sum ? s : op == ReduceOp::avg ? s / float(P) : m;
      RANK_CHECK(std::abs(out[i] - want) <= 1e-6f * std::abs(want), "reduce-scatter " + std::string(reduce_op_name(op)));
    }
  }
  // equal shares (the ring receives into `out` itself) leave the input as it was; and out lying
  // inside the input (this rank's share of it, reduced in place) works too
  {
    const size_t share = 777;
    std::vector<float> x(share * size_t(P)), y(share, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = val(r, i);
    const std::vector<float> before = x;
    const std::vector<size_t> equal(size_t(P), share);
    g.reduce_scatter_async(x.data(), y.data(), equal, ElemType::f32, ReduceOp::sum)->wait();
    RANK_CHECK(x == before, "reduce-scatter changed its input");
    for (size_t i = 0; i < share; ++i) {
      float s = 0;
      for (int q = 0; q < P; ++q) s += val(q, size_t(r) * share + i);
      RANK_CHECK(y[i] == s, "reduce-scatter, equal shares");
    }
    float* mine = x.data() + size_t(r) * share;
    g.reduce_scatter_async(x.data(), mine, equal, ElemType::f32, ReduceOp::sum)->wait();
    for (size_t i = 0; i < share; ++i) RANK_CHECK(mine[i] == y[i], "reduce-scatter in place");
  }
  // broadcast from the last rank
  std::vector<int32_t> b(333, r == P - 1 ? 42 : -1);
  g.broadcast(b.data(), b.size(), ElemType::i32, P - 1);
  for (int32_t v : b) RANK_CHECK(v == 42, "broadcast");
  // send/recv around a ring
  if (P > 1) {
    std::vector<float> s(4097, float(r)), got(4097, -1);
    auto sw = g.send_async(s.data(), s.size() * 4, (r + 1) % P, 7);
    auto rw = g.recv_async(got.data(), got.size() * 4, (r + P - 1) % P, 7);
    sw->wait();
    rw->wait();
    for (float v : got) RANK_CHECK(v == float((r + P - 1) % P), "send/recv");
  }
  g.barrier();
}

// Element i of the block rank src addresses to rank dst, exact in each type (ranks below 8).
inline int64_t code_i64(int src, int dst, size_t i) { return (int64_t(src) << 40) + (int64_t(dst) << 32) + int64_t(i); }
inline int32_t code_i32(int src, int dst, size_t i) { return int32_t(i % 100000) * 256 + src * 16 + dst; }
inline float code_f32(int src, int dst, size_t i) { return float((i % 4096) * 64 + size_t(src) * 8 + size_t(dst)); }
inline double code_f64(int src, int dst, size_t i) { return double(i) * 64 + src * 8 + dst; }
inline uint16_t code_bits(int src, int dst, size_t i) { return uint16_t(((i % 255) << 8) | size_t(src) << 4 | size_t(dst)); }

// Rank r sends sends[j] elements code(r, j, i) to each rank j, in blocks one after another, through
// `exchange(in, out)`; then block j of its output must hold code(j, r, i) for recvs[j] elements,
// the input must be as it was, and nothing past the output may be written.
template <class T, class Code, class Exchange>
void check_blocks(int r, const std::vector<size_t>& sends, const std::vector<size_t>& recvs, Code code,
                  Exchange exchange, const std::string& what) {
  std::vector<T> in;
  for (size_t j = 0; j < sends.size(); ++j)
    for (size_t i = 0; i < sends[j]; ++i) in.push_back(code(r, int(j), i));
  const size_t got = std::accumulate(recvs.begin(), recvs.end(), size_t(0));
  std::vector<T> out(got + 1, T(-1));
  const std::vector<T> before = in;
  exchange(in.data(), out.data());
  RANK_CHECK(in == before, what + " changed its input");
  RANK_CHECK(out[got] == T(-1), what + " wrote past its output");
  size_t at = 0;
  for (size_t j = 0; j < recvs.size(); ++j)
    for (size_t i = 0; i < recvs[j]; ++i)
      RANK_CHECK(out[at++] == code(int(j), r, i),
                 what + ": block from rank " + std::to_string(j) + " element " + std::to_string(i));
}

// all_to_all of n elements per block.
template <class T, class Code>
void check_all_to_all_of(dtrain::ProcessGroup& g, size_t n, ElemType t, Code code, bool async) {
  const std::vector<size_t> blocks(size_t(g.size()), n);
  check_blocks<T>(g.rank(), blocks, blocks, code, [&](const T* in, T* out) {
    if (async)
      g.all_to_all_async(in, out, n, t)->wait();
    else
      g.all_to_all(in, out, n, t);
  }, "all_to_all n=" + std::to_string(n) + (async ? " (async)" : ""));
}

// all_to_all over several sizes (0 and odd ones) and element types, blocking and async.
inline void check_all_to_all(dtrain::ProcessGroup& g) {
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1001), size_t(100003)}) {
    check_all_to_all_of<int64_t>(g, n, ElemType::i64, code_i64, false);
    check_all_to_all_of<float>(g, n, ElemType::f32, code_f32, true);
  }
  check_all_to_all_of<int32_t>(g, 333, ElemType::i32, code_i32, true);
  check_all_to_all_of<uint16_t>(g, 513, ElemType::bf16, code_bits, false);
  check_all_to_all_of<double>(g, 65, ElemType::f64, code_f32, false);
  // two in flight at once, waited in the other order
  std::vector<int64_t> a(size_t(g.size()) * 5, g.rank()), b(a.size(), g.rank() + 10), ao(a.size()), bo(a.size());
  auto wa = g.all_to_all_async(a.data(), ao.data(), 5, ElemType::i64);
  auto wb = g.all_to_all_async(b.data(), bo.data(), 5, ElemType::i64);
  wb->wait();
  wa->wait();
  for (size_t k = 0; k < ao.size(); ++k)
    RANK_CHECK(ao[k] == int64_t(k / 5) && bo[k] == int64_t(k / 5) + 10, "two all_to_alls in flight");
}

// Elements rank src sends rank dst in all_to_all_v pattern k of a group of P: 0: a few, some none;
// 1: odd sizes, none to itself; 2: the last rank sends nothing and rank 0 receives nothing; 3: a
// large block to the next rank only (and 5 to itself); 4: nothing at all anywhere.
inline size_t v_count(int k, int src, int dst, int P) {
  switch (k) {
    case 0: return size_t((src * 7 + dst * 3 + 1) % 5);
    case 1: return src == dst ? 0 : size_t(997 + 37 * src + 11 * dst);
    case 2: return src == P - 1 || dst == 0 ? 0 : size_t(3 * src + dst + 1);
    case 3: return dst == (src + 1) % P ? 100003 : src == dst ? 5 : 0;
    default: return 0;
  }
}

// Rank r's counts in pattern k: to each rank (first) and from each (second).
inline std::pair<std::vector<size_t>, std::vector<size_t>> v_counts(int k, int r, int P) {
  std::pair<std::vector<size_t>, std::vector<size_t>> c;
  for (int j = 0; j < P; ++j) {
    c.first.push_back(v_count(k, r, j, P));
    c.second.push_back(v_count(k, j, r, P));
  }
  return c;
}

// all_to_all_v in count pattern k. Each rank's counts both ways follow from v_count; with
// `exchanged`, the receive counts are instead what the senders tell it through all_to_all first
// (as a caller must), which must agree.
template <class T, class Code>
void check_all_to_all_v_of(dtrain::ProcessGroup& g, int k, ElemType t, Code code, bool async, bool exchanged = false) {
  const int r = g.rank();
  auto [sends, recvs] = v_counts(k, r, g.size());
  if (exchanged) {
    std::vector<int64_t> mine(sends.begin(), sends.end()), theirs(sends.size(), -1);
    g.all_to_all(mine.data(), theirs.data(), 1, ElemType::i64);
    const std::vector<size_t> told(theirs.begin(), theirs.end());
    RANK_CHECK(told == recvs, "counts exchanged with all_to_all");
    recvs = told;
  }
  check_blocks<T>(r, sends, recvs, code, [&](const T* in, T* out) {
    if (async)
      g.all_to_all_v_async(in, sends, out, recvs, t)->wait();
    else
      g.all_to_all_v(in, sends, out, recvs, t);
  }, "all_to_all_v pattern " + std::to_string(k) + (async ? " (async)" : ""));
}

// all_to_all_v over every count pattern and element type, blocking and async, two in flight.
inline void check_all_to_all_v(dtrain::ProcessGroup& g) {
  for (int k = 0; k <= 4; ++k) {
    check_all_to_all_v_of<int64_t>(g, k, ElemType::i64, code_i64, false, k == 1);
    check_all_to_all_v_of<float>(g, k, ElemType::f32, code_f32, true);
  }
  check_all_to_all_v_of<int32_t>(g, 1, ElemType::i32, code_i32, true);
  check_all_to_all_v_of<uint16_t>(g, 2, ElemType::bf16, code_bits, false);
  check_all_to_all_v_of<double>(g, 3, ElemType::f64, code_f64, false);
  // two in flight at once (patterns 0 and 1), waited in the other order
  const int P = g.size(), r = g.rank();
  std::vector<size_t> sends[2], recvs[2];
  std::vector<int32_t> in[2], out[2];
  for (int k = 0; k < 2; ++k) {
    std::tie(sends[k], recvs[k]) = v_counts(k, r, P);
    in[k].assign(std::accumulate(sends[k].begin(), sends[k].end(), size_t(0)), 1000 * k + r);
    out[k].assign(std::accumulate(recvs[k].begin(), recvs[k].end(), size_t(0)), -1);
  }
  auto w0 = g.all_to_all_v_async(in[0].data(), sends[0], out[0].data(), recvs[0], ElemType::i32);
  auto w1 = g.all_to_all_v_async(in[1].data(), sends[1], out[1].data(), recvs[1], ElemType::i32);
  w1->wait();
  w0->wait();
  for (int k = 0; k < 2; ++k) {
    size_t at = 0;
    for (int j = 0; j < P; ++j)
      for (size_t i = 0; i < recvs[k][size_t(j)]; ++i)
        RANK_CHECK(out[k][at++] == 1000 * k + j, "two all_to_all_vs in flight: pattern " + std::to_string(k));
  }
}

// bf16 elements reduce as every CPU backend must, bit for bit: through f32 with each result rounded
// to bf16 (to nearest even), and avg as that sum times 1/2 rounded again (two ranks: one addition, so
// the order of the ranks does not matter). Also f64, i32 and i64 reductions.
inline void check_bf16(dtrain::ProcessGroup& g) {
  using dtrain::bf16;
  using dtrain::to_bf16;
  using dtrain::to_f32;
  RANK_CHECK(g.size() == 2, "check_bf16 takes a group of two");
  const int r = g.rank();
  const size_t n = 777;
  auto value = [](int q, size_t i) {
    return to_bf16(float(q + 1) * 1.0078125f + float(i % 61) * (q ? -0.0390625f : 0.0517578125f)).bits;
  };
  std::vector<uint16_t> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = value(r, i);
  size_t rounded = 0;
  auto want = [&](ReduceOp op, size_t i) {
    const float a = to_f32(bf16{value(0, i)}), b = to_f32(bf16{value(1, i)});
    const uint16_t sum = to_bf16(a + b).bits;
    switch (op) {
      case ReduceOp::sum: return sum;
      case ReduceOp::avg: return to_bf16(float(to_f32(bf16{sum}) * 0.5)).bits;
      case ReduceOp::min: return to_bf16(std::min(a, b)).bits;
      case ReduceOp::max: return to_bf16(std::max(a, b)).bits;
    }
    return uint16_t(0);
  };
  for (size_t i = 0; i < n; ++i)
    rounded += to_f32(bf16{want(ReduceOp::sum, i)}) != to_f32(bf16{value(0, i)}) + to_f32(bf16{value(1, i)});
  RANK_CHECK(rounded > n / 4, "the values must make the bf16 sums round: " + std::to_string(rounded) + " of " +
                                  std::to_string(n) + " do");
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
    std::vector<uint16_t> x = mine;
    g.allreduce(x.data(), n, ElemType::bf16, op);
    for (size_t i = 0; i < n; ++i)
      RANK_CHECK(x[i] == want(op, i), std::string("bf16 allreduce ") + reduce_op_name(op) + " at " + std::to_string(i));
    const std::vector<size_t> shares{300, n - 300};
    std::vector<uint16_t> out(shares[size_t(r)]);
    g.reduce_scatter_async(mine.data(), out.data(), shares, ElemType::bf16, op)->wait();
    for (size_t i = 0; i < out.size(); ++i)
      RANK_CHECK(out[i] == want(op, size_t(r) * 300 + i),
                 std::string("bf16 reduce-scatter ") + reduce_op_name(op) + " at " + std::to_string(i));
  }
  std::vector<uint16_t> both(2 * n);
  g.allgather(mine.data(), both.data(), n, ElemType::bf16);
  for (size_t i = 0; i < n; ++i) RANK_CHECK(both[i] == value(0, i) && both[n + i] == value(1, i), "bf16 allgather");
  // the other element types
  std::vector<double> d(n);
  std::vector<int32_t> k(n), kmax(n);
  std::vector<int64_t> big(n);
  for (size_t i = 0; i < n; ++i) {
    d[i] = 0.1 * double(i) + r;
    k[i] = kmax[i] = int32_t(i) * (r ? -3 : 5);
    big[i] = (int64_t(1) << 40) * (r + 1) + int64_t(i);
  }
  g.allreduce(d.data(), n, ReduceOp::sum);
  g.allreduce(k.data(), n, ElemType::i32, ReduceOp::min);
  g.allreduce(kmax.data(), n, ElemType::i32, ReduceOp::max);
  g.allreduce(big.data(), n, ReduceOp::sum);
  for (size_t i = 0; i < n; ++i) {
    RANK_CHECK(d[i] == (0.1 * double(i) + 0) + (0.1 * double(i) + 1), "f64 sum");
    RANK_CHECK(k[i] == std::min(int32_t(i) * 5, int32_t(i) * -3) && kmax[i] == std::max(int32_t(i) * 5, int32_t(i) * -3),
               "i32 min and max");
    RANK_CHECK(big[i] == 3 * (int64_t(1) << 40) + 2 * int64_t(i), "i64 sum");
  }
}

}  // namespace dist_test

// Helpers of the GPU tests: the GPU device (or a skip saying why there is none), seeded random
// vectors, copies between host vectors and device buffers, and closeness relative to the largest
// reference value.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace gpu_test {

using namespace dtrain;

inline std::string no_gpu_reason() {
  return cuda_built() ? "no GPU visible to this process (CUDA is built in)"
                      : "this build has no CUDA backend (no CUDA toolkit at configure time)";
}

// The first GPU, or nullptr (then the test skips with no_gpu_reason()).
inline std::shared_ptr<ComputeDevice> gpu() {
  if (cuda_device_count() == 0) return nullptr;
  static std::shared_ptr<ComputeDevice> d = make_device("cuda:0", 0);
  return d;
}

#define NEED_GPU()                                           \
  auto gpu_dev = gpu_test::gpu();                            \
  if (!gpu_dev) GTEST_SKIP() << gpu_test::no_gpu_reason();   \
  [[maybe_unused]] ComputeDevice& G = *gpu_dev

// n uniform values in [lo, hi) from a seeded generator.
inline std::vector<float> rand_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// A device copy of a host vector.
template <class T>
struct OnDevice {
  Buffer buf;
  size_t n;
  ComputeDevice* dev;
  OnDevice(ComputeDevice& d, const std::vector<T>& host) : buf(d, sizeof(T) * std::max<size_t>(1, host.size())), n(host.size()), dev(&d) {
    d.upload(buf.data(), host.data(), sizeof(T) * n);
  }
  T* p() const { return static_cast<T*>(buf.data()); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    dev->download(h.data(), buf.data(), sizeof(T) * n);
    return h;
  }
};

// max |a - b| / max(max |ref|, tiny) ≤ tol
inline void expect_close(const std::vector<float>& ref, const std::vector<float>& got, double tol,
                         const std::string& what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  double scale = 1e-30, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, double(std::fabs(ref[i])));
    const double d = std::fabs(double(ref[i]) - double(got[i]));
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  EXPECT_LE(worst / scale, tol) << what << ": worst difference " << worst << " at element " << at << " (cpu "
                                << ref[at] << ", gpu " << got[at] << "), scale " << scale;
}

}  // namespace gpu_test

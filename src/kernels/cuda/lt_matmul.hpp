// Row-major matrix products through cuBLASLt: f32 in and out, f32 or bf16 tensor-core compute
// (CUBLAS_COMPUTE_32F_FAST_16BF: bf16 products, f32 accumulation), the bias add fused as an
// epilogue, strided batches. A plan (descriptors and the heuristic's algorithm) is made once per
// shape and reused, so a step makes no cuBLASLt queries.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "kernels/cpu/matmul.hpp"

namespace dtrain::cuda {

class LtMatmul {
 public:
  explicit LtMatmul(cudaStream_t stream);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;

  // C[M,N] (+)= alpha * op(A)·op(B) (+ bias[N]) as MatmulArgs says, for `batch` products whose
  // operands lie stride_a, stride_b, stride_c elements apart.
  void run(const float* A, const float* B, float* C, const MatmulArgs& a, int64_t batch = 1, int64_t stride_a = 0,
           int64_t stride_b = 0, int64_t stride_c = 0, float alpha = 1.0f);

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, int, int64_t, int64_t, int64_t, int64_t,
                         int, int, int>;
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan(const Key& k);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = size_t(32) << 20;
  std::map<Key, Plan> plans_;
};

}  // namespace dtrain::cuda

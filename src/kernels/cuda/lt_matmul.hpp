// Row-major matrix products through cuBLASLt: f32 in and out, f32 or bf16 tensor-core compute
// (CUBLAS_COMPUTE_32F_FAST_16BF: bf16 products, f32 accumulation), the bias add fused as an
// epilogue, strided batches. A plan (descriptors and the heuristic's algorithm) is made once per
// shape and reused, so a step makes no cuBLASLt queries. DTRAIN_CUDA_BF16=convert (an experiment,
// bench/README): bf16 products of one matrix (not the batched ones of attention; convert-all: those
// too) convert both operands to bf16 copies first and multiply those (bf16 in, f32 out) instead of
// asking cuBLASLt for FAST_16BF on the f32 data.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "kernels/types.hpp"

namespace dtrain::cuda {

class LtMatmul {
 public:
  explicit LtMatmul(cudaStream_t stream);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;

  // C[M,N] (+)= alpha * op(A)·op(B) (+ bias[N]) as MatmulArgs says, for `batch` products whose
  // operands lie stride_a, stride_b, stride_c elements apart. An operand stored in bf16 makes the
  // product a bf16 one of bf16 inputs (the other operand copied to bf16 first).
  void run(Operand A, Operand B, float* C, const MatmulArgs& a, int64_t batch = 1, int64_t stride_a = 0,
           int64_t stride_b = 0, int64_t stride_c = 0, float alpha = 1.0f);
  // Whether bf16 products of f32 operands copy them to bf16 (DTRAIN_CUDA_BF16=convert), not FAST_16BF.
  bool converts_bf16() const { return convert_bf16_; }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, int, int64_t, int64_t, int64_t, int64_t,
                         int, int, int, bool>;
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& plan(const Key& k);
  // A bf16 copy of `n` floats in scratch buffer `which` (0: A, 1: B), grown when needed.
  const void* bf16_copy(const float* x, int64_t n, int which);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = size_t(32) << 20;
  std::map<Key, Plan> plans_;
  bool convert_bf16_ = false;     // DTRAIN_CUDA_BF16=convert: products of one matrix
  bool convert_batched_ = false;  // DTRAIN_CUDA_BF16=convert-all: batched products too
  void* bf16_[2] = {nullptr, nullptr};
  size_t bf16_bytes_[2] = {0, 0};
};

}  // namespace dtrain::cuda

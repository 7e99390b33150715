// cuBLASLt matmul plans (see lt_matmul.hpp). Row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands swap places and no data moves.
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/kernels.cuh"
#include "kernels/cuda/lt_matmul.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace dtrain::cuda {

namespace {
// The largest power of two (up to 256) dividing the address and every batch stride in bytes.
int alignment(const void* p, int64_t stride_elems, int elem_bytes = 4) {
  uint64_t bits = reinterpret_cast<uint64_t>(p) | uint64_t(stride_elems * elem_bytes) | 256u;
  return int(bits & (~bits + 1));
}

void set_layout_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  const int32_t count = int32_t(batch);
  DT_CUDA(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  DT_CUDA(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}
}  // namespace

LtMatmul::LtMatmul(cudaStream_t stream) : stream_(stream) {
  DT_CUDA(cublasLtCreate(&handle_));
  DT_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
  const char* v = std::getenv("DTRAIN_CUDA_BF16");
  convert_bf16_ = v && std::strcmp(v, "convert") == 0;
  convert_batched_ = v && std::strcmp(v, "convert-all") == 0;
  convert_bf16_ = convert_bf16_ || convert_batched_;
}

LtMatmul::~LtMatmul() {
  for (auto& [k, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  for (void* b : bf16_) cudaFree(b);
  cublasLtDestroy(handle_);
}

LtMatmul::Plan& LtMatmul::plan(const Key& k) {
  auto it = plans_.find(k);
  if (it != plans_.end()) return it->second;
  const auto [M, N, K, ta, tb, bias, accumulate, prec, batch, sa, sb, sc, align_a, align_b, align_c, bf16_in] = k;
  Plan p;
  const cublasComputeType_t compute =
      Precision(prec) == Precision::bf16 && !bf16_in ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
  const cudaDataType_t in = bf16_in ? CUDA_R_16BF : CUDA_R_32F;
  DT_CUDA(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
  // cuBLAS "A" is our B (N×K after op), cuBLAS "B" is our A (K×M after op), D is Cᵀ (N×M).
  const cublasOperation_t op_a = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  DT_CUDA(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  DT_CUDA(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    DT_CUDA(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  }
  DT_CUDA(tb ? cublasLtMatrixLayoutCreate(&p.a, in, K, N, K) : cublasLtMatrixLayoutCreate(&p.a, in, N, K, N));
  DT_CUDA(ta ? cublasLtMatrixLayoutCreate(&p.b, in, M, K, M) : cublasLtMatrixLayoutCreate(&p.b, in, K, M, K));
  DT_CUDA(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, N, M, N));
  if (batch > 1) {
    set_layout_batch(p.a, batch, sb);
    set_layout_batch(p.b, batch, sa);
    set_layout_batch(p.c, batch, sc);
  }
  cublasLtMatmulPreference_t pref;
  DT_CUDA(cublasLtMatmulPreferenceCreate(&pref));
  DT_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                               sizeof workspace_bytes_));
  const uint32_t al_a = uint32_t(align_b), al_b = uint32_t(align_a), al_c = uint32_t(align_c);  // swapped roles
  DT_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
  DT_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
  DT_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
  DT_CUDA(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw Error("cuBLASLt has no algorithm for a " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                std::to_string(K) + " matmul (batch " + std::to_string(batch) + "): " + cublasLtGetStatusString(st));
  p.algo = result.algo;
  return plans_.emplace(k, p).first->second;
}

void LtMatmul::run(Operand A, Operand B, float* C, const MatmulArgs& a, int64_t batch, int64_t stride_a,
                   int64_t stride_b, int64_t stride_c, float alpha) {
  if (a.M == 0 || a.N == 0 || batch == 0) return;
  DT_ASSERT(!(a.bias && a.accumulate));
  if (a.K == 0) {  // an empty sum: C = 0 (or unchanged when accumulating)
    if (!a.accumulate) DT_CUDA(cudaMemsetAsync(C, 0, sizeof(float) * size_t(a.M * a.N * batch), stream_));
    return;
  }
  const bool bf16_in = A.bf16 || B.bf16 ||
                       (convert_bf16_ && a.precision == Precision::bf16 && (batch == 1 || convert_batched_));
  const void* a_in = A.data;
  const void* b_in = B.data;
  if (bf16_in) {  // each f32 operand's whole extent, batches and the gaps between them included
    if (!A.bf16) a_in = bf16_copy(A.f32(), (batch - 1) * stride_a + a.M * a.K, 0);
    if (!B.bf16) b_in = bf16_copy(B.f32(), (batch - 1) * stride_b + a.K * a.N, 1);
  }
  const int eb = bf16_in ? 2 : 4;
  const Key k{a.M, a.N, a.K, a.trans_a, a.trans_b, a.bias != nullptr, a.accumulate, int(a.precision), batch,
              stride_a, stride_b, stride_c, alignment(a_in, stride_a, eb), alignment(b_in, stride_b, eb),
              alignment(C, stride_c), bf16_in};
  Plan& p = plan(k);
  if (a.bias) DT_CUDA(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a.bias, sizeof a.bias));
  const float beta = a.accumulate ? 1.0f : 0.0f;
  DT_CUDA(cublasLtMatmul(handle_, p.op, &alpha, b_in, p.a, a_in, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_,
                         workspace_bytes_, stream_));
}

const void* LtMatmul::bf16_copy(const float* x, int64_t n, int which) {
  const size_t bytes = size_t(n) * 2;
  if (bf16_bytes_[which] < bytes) {
    if (bf16_[which]) {
      DT_CUDA(cudaStreamSynchronize(stream_));  // the old buffer may still be read
      DT_CUDA(cudaFree(bf16_[which]));
    }
    bf16_[which] = nullptr;
    bf16_bytes_[which] = 0;
    DT_CUDA(cudaMalloc(&bf16_[which], bytes));
    bf16_bytes_[which] = bytes;
  }
  to_bf16(x, static_cast<uint16_t*>(bf16_[which]), n, stream_);
  return bf16_[which];
}

}  // namespace dtrain::cuda

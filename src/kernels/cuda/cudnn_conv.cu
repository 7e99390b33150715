// cuDNN convolution and max pooling (see cudnn_conv.hpp): one handle on the device's stream,
// descriptors and algorithms per shape made on first use, f32 math exact (FMA, no TF32) like the CPU's.
#include "kernels/cuda/cudnn_conv.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "core/limits.hpp"
#include "kernels/cuda/check.cuh"

namespace dtrain::cuda {

// cuDNN's status in the style of DT_CUDA: an Error naming the call, its place and cuDNN's message;
// cuDNN's failure to allocate becomes AllocationFailed, as an allocation of ours would.
inline void check(cudnnStatus_t st, const char* call, const char* file, int line) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    throw AllocationFailed("cuDNN's working memory in " + std::string(call, std::strcspn(call, "(")));
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  throw Error(std::string("cuDNN error ") + cudnnGetErrorString(st) + " in " + call + " at " + file + ":" +
              std::to_string(line) + (detail[0] ? std::string(": ") + detail : std::string()));
}

namespace {

// The most workspace one algorithm may take; one that needs more is passed over for the next in rank.
constexpr size_t kMaxWorkspace = size_t(256) << 20;

std::string describe(const ConvShape& s) {
  auto dims = [](std::initializer_list<int64_t> v) {
    std::string out = "[";
    for (int64_t d : v) out += (out.size() > 1 ? ", " : "") + std::to_string(d);
    return out + "]";
  };
  return "x " + dims({s.N, s.C, s.H, s.W}) + ", w " + dims({s.K, s.C, s.R, s.S}) + ", stride " +
         std::to_string(s.stride) + ", pad " + std::to_string(s.pad);
}

// cuDNN's 4-d descriptors take int sizes: no tensor may hold more than INT_MAX elements.
void require_int_sized(int64_t elements, const std::string& what) {
  require(elements <= INT_MAX, what + " holds " + std::to_string(elements) +
                                   " elements, more than cuDNN's 32-bit sizes allow: lower train.batch_size");
}

// Algorithms that transform their operands (FFT, Winograd) round differently from a direct sum of
// products, by more than the 1e-5 that f32 keeps to the CPU's results: taken only when nothing else runs.
bool transforms(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transforms(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool transforms(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The heuristics' best usable algorithm, in their order: first one that is deterministic and sums
// products directly, then one that sums them directly, then any. Never one that converts f32
// operands to f16 (ALLOW_CONVERSION); in f32 never a tensor-op (TF32) one: f32 runs in FMA math.
// bf16 may run TF32 tensor ops: its operands are bf16 values already, which TF32 holds exactly.
template <class Perf>
const Perf* pick(const std::vector<Perf>& perf, int returned, bool bf16) {
  for (int strict = 2; strict >= 0; --strict)
    for (int i = 0; i < returned; ++i) {
      const Perf& r = perf[size_t(i)];
      if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspace) continue;
      if (r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || (!bf16 && r.mathType == CUDNN_TENSOR_OP_MATH)) continue;
      if (strict >= 1 && transforms(r.algo)) continue;
      if (strict >= 2 && r.determinism != CUDNN_DETERMINISTIC) continue;
      return &r;
    }
  return nullptr;
}

// One direction's choice: the heuristics queried (query(count, &returned, perf)) with the
// descriptor in the plan's math mode, the pick, then its workspace (bytes(algo, &size)) in the
// math mode it will run in. The descriptor is left in the plan's math mode for the next query.
template <class Perf, class Query, class Bytes>
auto choose(cudnnConvolutionDescriptor_t conv, bool bf16, int count, Query&& query, Bytes&& bytes,
            const char* direction, const ConvShape& s) {
  const cudnnMathType_t asked = bf16 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  std::vector<Perf> perf(size_t(std::max(count, 1)));
  int returned = 0;
  const std::string heuristics = std::string("cuDNN's ") + direction + " algorithm heuristics";
  check(query(int(perf.size()), &returned, perf.data()), heuristics.c_str(), __FILE__, __LINE__);
  const Perf* r = pick(perf, returned, bf16);
  if (!r)
    throw Error(std::string("cuDNN has no ") + direction + " algorithm for the convolution " + describe(s) +
                " within " + std::to_string(kMaxWorkspace >> 20) + " MiB of workspace" +
                (bf16 ? "" : " in exact f32 math") + ": change the layer's shape" +
                (bf16 ? "" : " or use train.precision = bf16"));
  CudnnConv::Choice<decltype(r->algo)> c;
  c.algo = r->algo;
  c.math = bf16 ? r->mathType : CUDNN_FMA_MATH;
  DT_CUDA(cudnnSetConvolutionMathType(conv, c.math));
  check(bytes(c.algo, &c.bytes), (std::string("cuDNN's ") + direction + " workspace size").c_str(), __FILE__, __LINE__);
  DT_CUDA(cudnnSetConvolutionMathType(conv, asked));
  return c;
}

const float kOne = 1.0f, kZero = 0.0f;  // cuDNN's alpha and beta for f32 data are floats

}  // namespace

CudnnConv::CudnnConv(cudaStream_t stream, ScratchPool& pool) : stream_(stream), pool_(pool) {
  DT_CUDA(cudnnCreate(&handle_));
  const cudnnStatus_t st = cudnnSetStream(handle_, stream_);
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(handle_);
    check(st, "cudnnSetStream(handle_, stream_)", __FILE__, __LINE__);
  }
}

CudnnConv::~CudnnConv() {
  convs_.clear();
  pools_.clear();
  cudnnDestroy(handle_);
}

CudnnConv::ConvPlan::~ConvPlan() {
  if (x) cudnnDestroyTensorDescriptor(x);
  if (y) cudnnDestroyTensorDescriptor(y);
  if (bias) cudnnDestroyTensorDescriptor(bias);
  if (w) cudnnDestroyFilterDescriptor(w);
  if (conv) cudnnDestroyConvolutionDescriptor(conv);
}

CudnnConv::PoolPlan::~PoolPlan() {
  if (pool) cudnnDestroyPoolingDescriptor(pool);
  if (x) cudnnDestroyTensorDescriptor(x);
  if (y) cudnnDestroyTensorDescriptor(y);
}

CudnnConv::ConvPlan& CudnnConv::conv_plan(const ConvShape& s, bool bf16) {
  const std::array<int64_t, 10> key{s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad, int64_t(bf16)};
  auto it = convs_.find(key);
  if (it != convs_.end()) return *it->second;
  DT_ASSERT(s.N > 0 && s.C > 0 && s.K > 0 && s.R > 0 && s.S > 0 && s.stride > 0 && s.pad >= 0 && s.P() > 0 &&
            s.Q() > 0);
  require_int_sized(s.input_floats(), "the convolution input " + describe(s));
  require_int_sized(s.output_floats(), "the convolution output of " + describe(s));
  require_int_sized(s.weight_floats(), "the convolution weight of " + describe(s));
  auto p = std::make_unique<ConvPlan>();  // destroys what it holds if a step below throws
  const auto f32 = CUDNN_DATA_FLOAT;
  DT_CUDA(cudnnCreateTensorDescriptor(&p->x));
  DT_CUDA(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, f32, int(s.N), int(s.C), int(s.H), int(s.W)));
  DT_CUDA(cudnnCreateTensorDescriptor(&p->y));
  DT_CUDA(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, f32, int(s.N), int(s.K), int(s.P()), int(s.Q())));
  DT_CUDA(cudnnCreateTensorDescriptor(&p->bias));
  DT_CUDA(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, f32, 1, int(s.K), 1, 1));
  DT_CUDA(cudnnCreateFilterDescriptor(&p->w));
  DT_CUDA(cudnnSetFilter4dDescriptor(p->w, f32, CUDNN_TENSOR_NCHW, int(s.K), int(s.C), int(s.R), int(s.S)));
  DT_CUDA(cudnnCreateConvolutionDescriptor(&p->conv));
  // PyTorch's convolution is cuDNN's cross-correlation (the kernel not flipped); f32 accumulation
  DT_CUDA(cudnnSetConvolution2dDescriptor(p->conv, int(s.pad), int(s.pad), int(s.stride), int(s.stride), 1, 1,
                                          CUDNN_CROSS_CORRELATION, f32));
  int n = 0, c = 0, h = 0, w = 0;
  DT_CUDA(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &h, &w));
  DT_ASSERT(n == s.N && c == s.K && h == s.P() && w == s.Q());
  DT_CUDA(cudnnSetConvolutionMathType(p->conv, bf16 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));

  int count = 0;
  DT_CUDA(cudnnGetConvolutionForwardAlgorithmMaxCount(handle_, &count));
  p->fwd = choose<cudnnConvolutionFwdAlgoPerf_t>(
      p->conv, bf16, count,
      [&](int k, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
        return cudnnGetConvolutionForwardAlgorithm_v7(handle_, p->x, p->w, p->conv, p->y, k, got, r);
      },
      [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle_, p->x, p->w, p->conv, p->y, a, b);
      },
      "forward", s);
  DT_CUDA(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle_, &count));
  p->data = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      p->conv, bf16, count,
      [&](int k, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p->w, p->y, p->conv, p->x, k, got, r);
      },
      [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, p->w, p->y, p->conv, p->x, a, b);
      },
      "input-gradient", s);
  DT_CUDA(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle_, &count));
  p->filter = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      p->conv, bf16, count,
      [&](int k, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p->x, p->y, p->conv, p->w, k, got, r);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, p->x, p->y, p->conv, p->w, a, b);
      },
      "weight-gradient", s);
  return *convs_.emplace(key, std::move(p)).first->second;
}

CudnnConv::PoolPlan& CudnnConv::pool_plan(const PoolShape& s) {
  const std::array<int64_t, 6> key{s.N, s.C, s.H, s.W, s.kernel, s.stride};
  auto it = pools_.find(key);
  if (it != pools_.end()) return *it->second;
  DT_ASSERT(s.N > 0 && s.C > 0 && s.kernel > 0 && s.stride > 0 && s.P() > 0 && s.Q() > 0);
  require_int_sized(s.input_floats(), "the max-pooling input [" + std::to_string(s.N) + ", " + std::to_string(s.C) +
                                          ", " + std::to_string(s.H) + ", " + std::to_string(s.W) + "]");
  auto p = std::make_unique<PoolPlan>();
  DT_CUDA(cudnnCreatePoolingDescriptor(&p->pool));
  // no padding; windows that do not fit are left out (floor), as PoolShape says. The deterministic
  // mode sums the gradients of overlapping windows in a fixed order.
  DT_CUDA(cudnnSetPooling2dDescriptor(p->pool, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_PROPAGATE_NAN, int(s.kernel),
                                      int(s.kernel), 0, 0, int(s.stride), int(s.stride)));
  DT_CUDA(cudnnCreateTensorDescriptor(&p->x));
  DT_CUDA(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(s.N), int(s.C), int(s.H),
                                     int(s.W)));
  DT_CUDA(cudnnCreateTensorDescriptor(&p->y));
  DT_CUDA(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(s.N), int(s.C), int(s.P()),
                                     int(s.Q())));
  int n = 0, c = 0, h = 0, w = 0;
  DT_CUDA(cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &n, &c, &h, &w));
  DT_ASSERT(n == s.N && c == s.C && h == s.P() && w == s.Q());
  return *pools_.emplace(key, std::move(p)).first->second;
}

const float* CudnnConv::operand(const float* src, int64_t n, Scratch slot, bool bf16) {
  if (!bf16) return src;
  float* dst = pool_.get(slot, n, stream_);
  round_to_bf16(src, dst, n, stream_);
  return dst;
}

void* CudnnConv::workspace(size_t bytes) {
  return bytes ? pool_.get(Scratch::conv_workspace, int64_t((bytes + 3) / 4), stream_) : nullptr;
}

// bf16 (here and below): the operands rounded to bf16 (kept as f32) and the convolution run in
// f32 with TF32 tensor ops allowed, which multiply bf16 values exactly: bf16 products, f32
// accumulation, f32 results, as on the CPU.
void CudnnConv::forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                        Precision p) {
  if (s.N == 0) return;
  const bool bf16 = p == Precision::bf16;
  ConvPlan& c = conv_plan(s, bf16);
  const float* xi = operand(x, s.input_floats(), Scratch::conv_a, bf16);
  const float* wi = operand(w, s.weight_floats(), Scratch::conv_b, bf16);
  void* ws = workspace(c.fwd.bytes);
  DT_CUDA(cudnnSetConvolutionMathType(c.conv, c.fwd.math));
  DT_CUDA(cudnnConvolutionForward(handle_, &kOne, c.x, xi, c.w, wi, c.conv, c.fwd.algo, ws, c.fwd.bytes, &kZero, c.y,
                                  y));
  if (bias) DT_CUDA(cudnnAddTensor(handle_, &kOne, c.bias, bias, &kOne, c.y, y));
}

// dx overwritten: beta 0 (cuDNN does not read dx then).
void CudnnConv::backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p) {
  if (s.N == 0) return;
  const bool bf16 = p == Precision::bf16;
  ConvPlan& c = conv_plan(s, bf16);
  const float* dyi = operand(dy, s.output_floats(), Scratch::conv_a, bf16);
  const float* wi = operand(w, s.weight_floats(), Scratch::conv_b, bf16);
  void* ws = workspace(c.data.bytes);
  DT_CUDA(cudnnSetConvolutionMathType(c.conv, c.data.math));
  DT_CUDA(cudnnConvolutionBackwardData(handle_, &kOne, c.w, wi, c.y, dyi, c.conv, c.data.algo, ws, c.data.bytes,
                                       &kZero, c.x, dx));
}

// dw and dbias accumulated: beta 1 adds cuDNN's result to what they hold.
void CudnnConv::backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s,
                                Precision p) {
  if (s.N == 0) return;
  const bool bf16 = p == Precision::bf16;
  ConvPlan& c = conv_plan(s, bf16);
  const float* xi = operand(x, s.input_floats(), Scratch::conv_a, bf16);
  const float* dyi = operand(dy, s.output_floats(), Scratch::conv_b, bf16);
  void* ws = workspace(c.filter.bytes);
  DT_CUDA(cudnnSetConvolutionMathType(c.conv, c.filter.math));
  DT_CUDA(cudnnConvolutionBackwardFilter(handle_, &kOne, c.x, xi, c.y, dyi, c.conv, c.filter.algo, ws, c.filter.bytes,
                                         &kOne, c.w, dw));
  // from the same (rounded) dy as the weight's gradient, as oneDNN's bf16 backward-weights does
  if (dbias) DT_CUDA(cudnnConvolutionBackwardBias(handle_, &kOne, c.y, dyi, &kOne, c.bias, dbias));
}

void CudnnConv::maxpool_forward(const float* x, float* y, const PoolShape& s) {
  if (s.N == 0) return;
  PoolPlan& p = pool_plan(s);
  DT_CUDA(cudnnPoolingForward(handle_, p.pool, &kOne, p.x, x, &kZero, p.y, y));
}

// cuDNN finds each window's maximum again from x and y (no record kept from forward); dx overwritten.
void CudnnConv::maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const PoolShape& s) {
  if (s.N == 0) return;
  PoolPlan& p = pool_plan(s);
  DT_CUDA(cudnnPoolingBackward(handle_, p.pool, &kOne, p.y, y, p.y, dy, p.x, x, &kZero, p.x, dx));
}

}  // namespace dtrain::cuda

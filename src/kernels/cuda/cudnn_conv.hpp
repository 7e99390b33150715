// 2-D convolution and max pooling on the GPU through cuDNN's legacy API, with the contracts of
// kernels/cpu/conv.hpp: descriptors and heuristic algorithms made once per shape, workspace from the device's scratch.
#pragma once
#include <cudnn.h>

#include <array>
#include <map>
#include <memory>

#include "kernels/cuda/kernels.cuh"
#include "kernels/types.hpp"

namespace dtrain::cuda {

class CudnnConv {
 public:
  // Work is queued on `stream`; workspace and bf16 copies come from `pool` (both the device's).
  CudnnConv(cudaStream_t stream, ScratchPool& pool);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, Precision p);
  void backward_input(const float* dy, const float* w, float* dx, const ConvShape& s, Precision p);
  void backward_weight(const float* x, const float* dy, float* dw, float* dbias, const ConvShape& s, Precision p);
  void maxpool_forward(const float* x, float* y, const PoolShape& s);
  void maxpool_backward(const float* x, const float* y, const float* dy, float* dx, const PoolShape& s);

  // An algorithm of one direction, the math mode it runs in and its workspace.
  template <class Algo>
  struct Choice {
    Algo algo{};
    cudnnMathType_t math = CUDNN_FMA_MATH;
    size_t bytes = 0;
  };

 private:
  struct ConvPlan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    Choice<cudnnConvolutionFwdAlgo_t> fwd;
    Choice<cudnnConvolutionBwdDataAlgo_t> data;
    Choice<cudnnConvolutionBwdFilterAlgo_t> filter;
    ~ConvPlan();
  };
  struct PoolPlan {
    cudnnPoolingDescriptor_t pool = nullptr;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    ~PoolPlan();
  };
  ConvPlan& conv_plan(const ConvShape& s, bool bf16);
  PoolPlan& pool_plan(const PoolShape& s);
  // src rounded to bf16 values (kept as f32) in a scratch slot, or src itself when !bf16.
  const float* operand(const float* src, int64_t n, Scratch slot, bool bf16);
  void* workspace(size_t bytes);

  cudaStream_t stream_;
  ScratchPool& pool_;
  cudnnHandle_t handle_ = nullptr;
  std::map<std::array<int64_t, 10>, std::unique_ptr<ConvPlan>> convs_;
  std::map<std::array<int64_t, 6>, std::unique_ptr<PoolPlan>> pools_;
};

}  // namespace dtrain::cuda

// Error checks for CUDA runtime and cuBLASLt calls: a failure becomes a dtrain::Error naming the
// call, its place and the library's message.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace dtrain::cuda {

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + call +
                " at " + file + ":" + std::to_string(line));
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS error ") + cublasLtGetStatusString(s) + " in " + call + " at " + file + ":" +
                std::to_string(line));
}

}  // namespace dtrain::cuda

#define DT_CUDA(call) ::dtrain::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad configuration shows here, not at the next synchronisation.
#define DT_CUDA_LAUNCHED() DT_CUDA(cudaGetLastError())

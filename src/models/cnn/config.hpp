// The image classifier's hyper-parameters (model.kind = cnn): its model.* keys as a table, their
// validation, and the layer sizes they give. The defaults are PyTorch's MNIST example network;
// docs/model.md's CNN section says what each key means.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_keys.hpp"
#include "kernels/types.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

struct CnnConfig {
  int64_t in_channels = 0;  // 0: from the data
  int64_t height = 0, width = 0;  // 0: from the data
  int64_t classes = 0;      // 0: from the data
  std::string channels = "32,64";  // each convolution's output channels
  std::string kernel = "3";        // each convolution's kernel size (one value: all of them)
  int64_t padding = 0;             // zero padding of every convolution
  int64_t pool = 2;                // max pooling after the last convolution (1: none)
  std::string hidden = "128";      // widths of the hidden linear layers ("": none)
  float conv_dropout = 0.25f;      // dropout after the last convolution (and its pooling)
  float dropout = 0.5f;            // dropout after each hidden linear layer
  std::string activation = "relu";  // after each convolution and hidden linear layer: relu or gelu (tanh)

  Activation act() const { return activation == "gelu" ? Activation::gelu : Activation::relu; }

  // The lists, read (validate() has checked them).
  std::vector<int64_t> conv_channels() const;
  std::vector<int64_t> kernels() const;  // one per convolution
  std::vector<int64_t> hidden_widths() const;
  // The layers' shapes for one sample (N = 1): each convolution's, the pooling's (when pool > 1)
  // and the floats per sample that enter the linear layers.
  struct Shapes {
    std::vector<ConvShape> convs;
    bool pooled = false;
    PoolShape pool;
    int64_t features = 0;
  };
  Shapes shapes() const;

  // Throws Error naming the bad key and the fix (the sizes from the data only when data_known).
  void validate(bool data_known = true) const;
};

const ConfigKeyTable<CnnConfig>& cnn_keys();
CnnConfig cnn_config(const ModelConfig& c);

}  // namespace dtrain

// model.kind = cnn: an image classifier, by default PyTorch's MNIST example network (conv 1→32 3×3,
// ReLU, conv 32→64 3×3, ReLU, max-pool 2, dropout 0.25, linear 9216→128, ReLU, dropout 0.5, linear
// 128→10, cross-entropy), under that example's tensor names (conv1.weight, …, fc2.bias). Its units:
// one ConvUnit per convolution, one DenseUnit per hidden linear layer, the shared ClassifierHead as the last
// linear layer and loss. Its metric is accuracy; tensor parallelism is refused (no TP regions).
#pragma once
#include "models/cnn/config.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

const ModelKind& cnn_kind();
UnitList cnn_units(const CnnConfig& c, ComputeDevice& device = cpu_device(), TpSlice slice = {});

}  // namespace dtrain

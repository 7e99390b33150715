// The shapes and parameter names of a model's two ends around its blocks: the token embedding (with
// positions or none) and the classifier head (final norm, classifier, fused loss). Every decoder
// kind (the Transformer, Llama) fills one in and shares nn/token_embedding and nn/classifier_head; the
// CNN fills in the head's part for its last layer. Parameter names are the kind's (its checkpoints'
// and exports' names).
#pragma once
#include <cstdint>
#include <string>

#include "nn/unit.hpp"

namespace dtrain {

struct EmbedHeadShape {
  int64_t vocab_size = 0, seq_len = 0, dim = 0;
  enum class Positions { none, sinusoidal, learned } positions = Positions::sinusoidal;
  enum class FinalNorm { none, layer, rms } final_norm = FinalNorm::layer;
  float norm_eps = 1e-5f;
  bool tied = false;       // the classifier reads the embedding's table
  bool head_bias = true;
  Init head_init = Init::xavier;  // the classifier's weights (fan_in_uniform: PyTorch's Linear default)
  std::string table = "embed.weight";  // parameter names
  std::string positions_table = "pos.weight";
  std::string norm = "norm_f";         // its weight (and bias) are norm + ".weight" (".bias")
  std::string head = "head";           // its classifier: head + ".weight" (".bias")
};

// The embedding's dropout is keyed (unit 0, site 0) with the sample and element.
constexpr uint32_t kEmbeddingDropSite = 0;

}  // namespace dtrain

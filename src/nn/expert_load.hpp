// What a model's mixture-of-experts layers saw in training since it was last taken: the tokens
// routed to each expert of each layer, and the balance loss they added (its weighted share of the
// loss, summed over the samples), for the run log's records. Filled by the layers' backward (once per
// micro-batch, whatever the recompute), summed over ranks by the parallel plan.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

struct ExpertLoad {
  int64_t layers = 0, experts = 0;  // every mixture-of-experts layer of the model, all its experts
  std::vector<double> tokens;       // [layer · experts + expert]: token copies routed there (and kept)
  std::vector<double> dropped;      // [layer]: token copies the capacity dropped
  bool capacity = false;            // the layers have a capacity (else nothing is dropped)
  double balance_loss = 0.0;        // Σ over samples of Σ over layers of the layer's weight × its balance loss
  double samples = 0.0;             // the samples the sums are over (a layer's count, not summed over layers)

  bool empty() const { return layers == 0; }
  void size_for(int64_t n_layers, int64_t n_experts) {
    if (layers == 0) {
      layers = n_layers;
      experts = n_experts;
      tokens.assign(size_t(n_layers * n_experts), 0.0);
      dropped.assign(size_t(n_layers), 0.0);
    }
  }
};

}  // namespace dtrain

// Units: blocks of parameters that parallel strategies treat as one (the embedding, each block,
// the head). A unit's parameters and gradients each live in one contiguous buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/arena.hpp"

namespace dtrain {

enum class Init { xavier, zeros, ones, fan_in_uniform };

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  Init init;
  int64_t fan_in = 0;  // for Init::fan_in_uniform (biases)
  int64_t offset = 0;  // in floats, within the unit's buffers
  int64_t numel() const { return shape_numel(shape); }
};

class Unit;

// A handle to one parameter of a unit, valid once the unit's buffers are bound.
struct ParamRef {
  Unit* unit = nullptr;
  size_t index = 0;
  float* data() const;
  float* grad() const;
  const ParamInfo& info() const;
};

class Unit {
 public:
  explicit Unit(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  ParamRef add(const std::string& name, std::vector<int64_t> shape, Init init, int64_t fan_in = 0);
  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t numel() const { return numel_; }
  // Points the unit at its parameter and gradient storage (numel() floats each).
  void bind(float* params, float* grads) {
    param_ = params;
    grad_ = grads;
  }
  float* param_data() const { return param_; }
  float* grad_data() const { return grad_; }
  // Units whose parameters this unit's forward also reads, and whose gradients it writes (a tied
  // head reads the embedding's weight): whoever binds storage binds theirs for this unit's window.
  void add_read(Unit* other) { reads_.push_back(other); }
  const std::vector<Unit*>& reads() const { return reads_; }
  // Whether the unit's backward reads its parameters (an embedding's does not: it only scatters
  // gradients), so a sharding strategy knows whether to gather them for it.
  void set_backward_reads_params(bool b) { backward_reads_params_ = b; }
  bool backward_reads_params() const { return backward_reads_params_; }

 private:
  std::string name_;
  std::vector<ParamInfo> params_;
  int64_t numel_ = 0;
  float* param_ = nullptr;
  float* grad_ = nullptr;
  std::vector<Unit*> reads_;
  bool backward_reads_params_ = true;
};

inline float* ParamRef::data() const { return unit->param_data() + info().offset; }
inline float* ParamRef::grad() const { return unit->grad_data() + info().offset; }
inline const ParamInfo& ParamRef::info() const { return unit->params()[index]; }

// Fills every parameter of the units with its seeded initial values (docs/model.md).
void init_parameters(const std::vector<Unit*>& units, uint64_t seed);

// Elements [lo, hi) of a unit's flat buffer as init_parameters makes them (the padding between
// parameters zero) into out[0, hi - lo); first_index is the model-wide index of the unit's first
// parameter. Values depend only on (seed, parameter, element): a shard of a unit is initialised
// directly, equal to the same slice of the whole.
void init_unit_range(const Unit& u, uint32_t first_index, uint64_t seed, int64_t lo, int64_t hi, float* out);

}  // namespace dtrain

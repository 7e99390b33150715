// Units: blocks of parameters that parallel strategies treat as one (the embedding, each block,
// the head). A unit's parameters and gradients each live in one contiguous buffer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/types.hpp"
#include "tensor/arena.hpp"

namespace dtrain {

enum class Init { xavier, zeros, ones, fan_in_uniform };

// How tensor parallelism cuts a parameter: along dimension `dim` (-1: not cut, every slice holds
// all of it), seen as `blocks` equal blocks (qkv's rows are [q|k|v]: 3 blocks, so a slice of heads
// is three row blocks), each slice holding the same 1/count of every block. A single block that
// the slices do not divide (the vocabulary) is padded: each holds ceil(size/count) rows, and the
// rows past the end are padding (zero, outside the global tensor).
struct TpSplit {
  int dim = -1;
  int blocks = 1;
};

// Which of `count` tensor-parallel slices a model is, and whether the rows between its cut matmuls
// are split across the slices too (sequence parallel). One process: the one slice.
struct TpSlice {
  int count = 1;
  int index = 0;
  bool sequence = false;
  bool splits_rows() const { return sequence && count > 1; }
  // Of a pass's `rows` rows, those this slice runs its norms, dropout and residuals on: how many, and
  // the first (sequence parallel: a contiguous share; otherwise all of them).
  int64_t local_rows(int64_t rows) const { return splits_rows() ? rows / count : rows; }
  int64_t first_row(int64_t rows) const { return splits_rows() ? index * local_rows(rows) : 0; }
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // what this slice holds (the global shape when not cut)
  Init init;
  int64_t fan_in = 0;  // for Init::fan_in_uniform (biases)
  int64_t offset = 0;  // in floats, within the unit's buffers
  std::vector<int64_t> global_shape;
  TpSplit split;
  int64_t split_offset = 0;  // along split.dim, within each block: where this slice's part starts
  // Its gradient is this slice's rows' share only (a norm under sequence parallel): the slices'
  // gradients are summed before the optimizer step.
  bool partial_grad = false;
  uint32_t index = 0;  // model-wide parameter index, from its unit's first_index(): the key of its initial values
  int64_t numel() const { return shape_numel(shape); }
  bool is_cut() const { return split.dim >= 0 && shape != global_shape; }
  // Flat index in the global tensor of element e of this slice's part; -1 for padding.
  int64_t global_element(int64_t e) const;
};

class Unit;

// A handle to one parameter of a unit, valid once the unit's buffers are bound.
struct ParamRef {
  Unit* unit = nullptr;
  size_t index = 0;
  float* data() const;
  float* grad() const;
  const ParamInfo& info() const;
  // The weight as a product of precision p reads it: in a bf16 product, the unit's bf16 copy where it
  // has one (Unit::bind_bf16); otherwise the f32 values (which a bf16 product then rounds itself).
  Operand operand(Precision p) const;
};

class Unit {
 public:
  // experts: the unit holds a mixture of experts' expert matrices (Module::expert_unit), which
  // expert parallel splits over ranks while every other unit stays data parallel.
  explicit Unit(std::string name, bool experts = false) : name_(std::move(name)), experts_(experts) {}
  const std::string& name() const { return name_; }
  bool experts() const { return experts_; }
  // A parameter of global shape `shape`, of which this unit holds slice `slice` when cut by `split`.
  ParamRef add(const std::string& name, std::vector<int64_t> shape, Init init, int64_t fan_in = 0,
               TpSplit split = {}, TpSlice slice = {});
  const std::vector<ParamInfo>& params() const { return params_; }
  // Parameters of the whole model this unit does not hold (another rank's experts), counted where
  // they stand among its own: their model-wide indices are skipped, so every parameter keeps the
  // index (and the initial values) it has in the one-process model.
  void skip(int64_t params, int64_t global_numel) {
    next_index_ += uint32_t(params);
    skipped_numel_ += global_numel;
  }
  uint32_t index_span() const { return next_index_; }  // model-wide indices it takes, held or skipped
  int64_t skipped_numel() const { return skipped_numel_; }
  // The parameter's gradient is this slice's rows' share (see ParamInfo::partial_grad).
  void set_partial_grad(const ParamRef& p);
  int64_t numel() const { return numel_; }
  // Points the unit at its parameter and gradient storage (numel() floats each).
  void bind(float* params, float* grads) {
    param_ = params;
    grad_ = grads;
  }
  float* param_data() const { return param_; }
  float* grad_data() const { return grad_; }
  // Its parameters rounded to bf16 (numel() of them), which bf16 products read instead of rounding the
  // f32 values on every call (train.precision = bf16); null: none. Whoever binds it keeps it equal to
  // the parameters rounded after every write (the model after init and load, the optimizer after
  // each update, FSDP at each gather): a stale copy would be a silent wrong result.
  void bind_bf16(uint16_t* params) { param_bf16_ = params; }
  uint16_t* param_bf16() const { return param_bf16_; }
  // Whether matrix products read some of its parameters (a Linear's weight, a tied head's table):
  // only such a unit is given a bf16 copy (an untied embedding's table is only looked up).
  void set_read_by_products() { read_by_products_ = true; }
  bool read_by_products() const { return read_by_products_; }
  // Units whose parameters this unit's forward also reads, and whose gradients it writes (a tied
  // head reads the embedding's weight): whoever binds storage binds theirs for this unit's window.
  void add_read(Unit* other) { reads_.push_back(other); }
  const std::vector<Unit*>& reads() const { return reads_; }
  // Whether the unit's backward reads its parameters (an embedding's does not: it only scatters
  // gradients), so a sharding strategy knows whether to gather them for it.
  void set_backward_reads_params(bool b) { backward_reads_params_ = b; }
  bool backward_reads_params() const { return backward_reads_params_; }
  // Model-wide index of its first parameter: with the seed, it keys the initial values, so a unit
  // built alone (a pipeline stage) draws what it would in the whole model.
  void set_first_index(uint32_t i) { first_index_ = i; }
  uint32_t first_index() const { return first_index_; }

 private:
  std::string name_;
  bool experts_ = false;
  std::vector<ParamInfo> params_;
  uint32_t next_index_ = 0;
  int64_t skipped_numel_ = 0;
  int64_t numel_ = 0;
  float* param_ = nullptr;
  float* grad_ = nullptr;
  uint16_t* param_bf16_ = nullptr;
  bool read_by_products_ = false;
  std::vector<Unit*> reads_;
  bool backward_reads_params_ = true;
  uint32_t first_index_ = 0;
};

inline void Unit::set_partial_grad(const ParamRef& p) { params_[p.index].partial_grad = true; }
inline float* ParamRef::data() const { return unit->param_data() + info().offset; }
inline float* ParamRef::grad() const { return unit->grad_data() + info().offset; }
inline const ParamInfo& ParamRef::info() const { return unit->params()[index]; }
inline Operand ParamRef::operand(Precision p) const {
  if (p == Precision::bf16 && unit->param_bf16()) return Operand(unit->param_bf16() + info().offset);
  return data();
}

// Fills every parameter of the units with its seeded initial values (docs/model.md).
void init_parameters(const std::vector<Unit*>& units, uint64_t seed);

// Elements [lo, hi) of a unit's flat buffer as init_parameters makes them (the padding between
// parameters zero) into out[0, hi - lo). Values depend only on (seed, model-wide parameter index,
// element): a shard of a unit is initialised directly, equal to the same slice of the whole.
void init_unit_range(const Unit& u, uint64_t seed, int64_t lo, int64_t hi, float* out);

}  // namespace dtrain

// Typed batches (see batch.hpp): kind-checked access to a view's inputs and sample slices.
#include "data/batch.hpp"

#include "core/error.hpp"

namespace dtrain {

const int32_t* BatchView::tokens() const {
  DT_ASSERT(shape.input == InputKind::tokens);
  return static_cast<const int32_t*>(inputs);
}

const float* BatchView::pixels() const {
  DT_ASSERT(shape.input == InputKind::images);
  return static_cast<const float*>(inputs);
}

BatchView BatchView::slice(int64_t first, int64_t n) const {
  DT_ASSERT(first >= 0 && n >= 0 && first + n <= samples);
  BatchView v = *this;
  v.samples = n;
  v.inputs = shape.input == InputKind::tokens ? static_cast<const void*>(tokens() + first * shape.inputs)
                                              : static_cast<const void*>(pixels() + first * shape.inputs);
  v.targets = targets + first * shape.targets;
  return v;
}

BatchView Batch::view() const {
  BatchView v;
  v.shape = shape;
  v.samples = samples;
  v.inputs = shape.input == InputKind::tokens ? static_cast<const void*>(tokens.data())
                                              : static_cast<const void*>(pixels.data());
  v.targets = targets.data();
  return v;
}

}  // namespace dtrain

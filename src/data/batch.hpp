// Typed batches: what one sample is (token windows or images with a class label), a non-owning
// view of samples as a model reads them, and the loader's owning Batch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

enum class InputKind { tokens, images };

// What one sample is: `inputs` values of its input kind (tokens: int32 ids; images: float pixels,
// channels × height × width) and `targets` int32 values (tokens: the next token at each position;
// images: one class label).
struct SampleShape {
  InputKind input = InputKind::tokens;
  int64_t inputs = 0;   // input values per sample
  int64_t targets = 0;  // targets per sample
  bool operator==(const SampleShape&) const = default;
  size_t input_bytes() const { return size_t(inputs) * 4; }  // a sample's inputs: int32 and float alike
};

// Samples as a model reads them: host memory, sample-major, not owned.
struct BatchView {
  SampleShape shape;
  int64_t samples = 0;
  const void* inputs = nullptr;      // int32 token ids or float pixels, shape.inputs per sample
  const int32_t* targets = nullptr;  // shape.targets per sample
  const int32_t* tokens() const;     // inputs as token ids (DT_ASSERT the kind)
  const float* pixels() const;       // inputs as pixels (DT_ASSERT the kind)
  BatchView slice(int64_t first, int64_t n) const;  // samples [first, first + n)
};

// A batch that owns its samples (the loader fills it).
struct Batch {
  SampleShape shape;
  int64_t samples = 0;
  std::vector<int32_t> tokens;        // inputs when shape.input == tokens
  std::vector<float> pixels;          // inputs when shape.input == images
  std::vector<int32_t> targets;
  std::vector<int64_t> sample_index;  // dataset index of each sample
  // A stand-in of one sample for a rank whose share of the epoch ended before the others' (every
  // rank steps together): it is computed and counts for nothing (its loss weight is zero).
  bool filler = false;
  BatchView view() const;
};

}  // namespace dtrain

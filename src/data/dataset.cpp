// Fixed-length training samples (windows with shifted targets) over a memory-mapped token file, and
// normalised images over a memory-mapped image file.
#include "data/dataset.hpp"

#include "core/error.hpp"

namespace dtrain {

WindowDataset::WindowDataset(const TokenFile& tokens, int64_t seq_len, int64_t stride)
    : tokens_(tokens.data()),
      n_tokens_(tokens.size()),
      vocab_size_(tokens.vocab_size()),
      seq_len_(seq_len),
      stride_(stride) {
  require(seq_len >= 1,
          "seq_len must be at least 1 (got " + std::to_string(seq_len) + "): set model.seq_len to a positive value");
  require(stride >= 1,
          "window stride must be at least 1 (got " + std::to_string(stride) + "): set data.stride to a positive value");
  size_ = n_tokens_ >= seq_len + 1 ? (n_tokens_ - seq_len - 1) / stride + 1 : 0;
  require(size_ > 0, "token file " + tokens.path() + " has only " + std::to_string(n_tokens_) +
                         " tokens, fewer than seq_len+1 = " + std::to_string(seq_len + 1) +
                         ": use a smaller model.seq_len or more data");
}

void WindowDataset::get(int64_t i, int32_t* input, int32_t* target) const {
  DT_ASSERT(i >= 0 && i < size_);
  const uint32_t* src = tokens_ + i * stride_;
  for (int64_t t = 0; t < seq_len_; ++t) input[t] = int32_t(src[t]);
  for (int64_t t = 0; t < seq_len_; ++t) target[t] = int32_t(src[t + 1]);
}

ImageDataset::ImageDataset(const ImageFile& images, float mean, float std) : images_(images) {
  DT_ASSERT(std > 0);
  for (int v = 0; v < 256; ++v) value_[size_t(v)] = (float(v) / 255.0f - mean) / std;
}

void ImageDataset::get(int64_t i, void* inputs, int32_t* targets) const {
  DT_ASSERT(i >= 0 && i < images_.size());
  float* out = static_cast<float*>(inputs);
  const uint8_t* px = images_.pixels(i);
  const int64_t n = images_.shape().pixels();
  for (int64_t k = 0; k < n; ++k) out[k] = value_[px[k]];
  targets[0] = images_.label(i);
}

}  // namespace dtrain

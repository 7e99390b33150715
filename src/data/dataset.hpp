// Datasets: the interface the loader reads samples through; fixed-length training samples over a
// token file (window i starts at token i*stride, its target is the same window shifted by one token);
// normalised images with their class over an image file.
#pragma once
#include <array>
#include <cstdint>

#include "data/batch.hpp"
#include "data/image_file.hpp"
#include "data/token_file.hpp"

namespace dtrain {

// How a token split is cut into windows.
struct WindowOptions {
  int64_t stride = 0;                // windows start every this many tokens; 0: seq_len (each token scored once)
  bool document_boundaries = false;  // true: no window crosses from one document into the next
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;            // samples
  virtual SampleShape shape() const = 0;
  // Sample i: shape().inputs input values (int32 or float by kind) and shape().targets targets.
  virtual void get(int64_t i, void* inputs, int32_t* targets) const = 0;
  // Whether its samples go on from epoch to epoch (a mix: each source continues where the last epoch
  // left it): the loader then reads epoch e's sample i as sample e·size() + i, which get() takes.
  virtual bool continues_across_epochs() const { return false; }
};

class WindowDataset : public Dataset {
 public:
  // The token file must outlive the dataset. Throws Error when no full window fits.
  WindowDataset(const TokenFile& tokens, int64_t seq_len, int64_t stride = 1);

  int64_t size() const override { return size_; }
  // seq_len token ids in, seq_len next tokens as targets.
  SampleShape shape() const override { return {InputKind::tokens, seq_len_, seq_len_}; }
  int64_t seq_len() const { return seq_len_; }
  int64_t stride() const { return stride_; }
  int64_t num_tokens() const { return n_tokens_; }
  uint32_t vocab_size() const { return vocab_size_; }

  // input = tokens[s, s+T), target = tokens[s+1, s+T+1) with s = i*stride; each buffer holds T.
  void get(int64_t i, int32_t* input, int32_t* target) const;
  // The same through the interface: `inputs` holds int32 token ids.
  void get(int64_t i, void* inputs, int32_t* targets) const override {
    get(i, static_cast<int32_t*>(inputs), targets);
  }

 private:
  const uint32_t* tokens_;
  int64_t n_tokens_;
  uint32_t vocab_size_;
  int64_t seq_len_;
  int64_t stride_;
  int64_t size_;
};

// Sample i of an image file: its C×H×W pixels as floats (pixel / 255 - mean) / std, computed in
// float as torchvision's ToTensor and Normalize do, and its label.
class ImageDataset : public Dataset {
 public:
  // The image file must outlive the dataset; std > 0.
  ImageDataset(const ImageFile& images, float mean, float std);

  int64_t size() const override { return images_.size(); }
  // C×H×W float pixels in, one int32 class label as the target.
  SampleShape shape() const override { return {InputKind::images, images_.shape().pixels(), 1}; }
  const ImageFile& images() const { return images_; }
  // `inputs` holds shape().inputs floats.
  void get(int64_t i, void* inputs, int32_t* targets) const override;

 private:
  const ImageFile& images_;
  std::array<float, 256> value_{};  // the input value of each byte value
};

}  // namespace dtrain

// The cnn kind (see kind.hpp).
#include "models/cnn/kind.hpp"

#include <algorithm>

#include "models/cnn/units.hpp"
#include "models/model_kinds.hpp"
#include "nn/classifier_head.hpp"

namespace dtrain {

namespace {

std::string list_text(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

class CnnKind : public TableModelKind<CnnConfig> {
 public:
  std::string name() const override { return "cnn"; }
  std::string about() const override {
    return "an image classifier: convolutions, max pooling, hidden linear layers (PyTorch's MNIST example by default)";
  }
  const ConfigKeyTable<CnnConfig>& table() const override { return cnn_keys(); }
  void check(const CnnConfig& t, bool data_known) const override { t.validate(data_known); }

  void fit_to_data(ModelConfig& c, const DataFacts& data, const std::string& data_name) const override {
    const CnnConfig t = config(c);
    auto fit = [&](const char* key, int64_t given, int64_t value, const char* what) {
      require(given == 0 || given == value,
              std::string("model.") + key + " = " + std::to_string(given) + " but the images of " + data_name +
                  " have " + std::to_string(value) + " " + what + ": leave model." + key +
                  " out (it is taken from the data), or point data.dir at the data the model is meant for");
      c.values[key] = value;
    };
    fit("in_channels", t.in_channels, data.channels, "channels");
    fit("height", t.height, data.height, "rows of pixels");
    fit("width", t.width, data.width, "columns of pixels");
    fit("classes", t.classes, data.classes, "classes");
  }

  // The layers from the weights' shapes (conv1.weight … and fc1.weight …): channels, kernels, hidden
  // widths, classes, input channels; the image size, which no weight holds, as given or the square
  // one whose features fit fc1.
  void fit_to_weights(ModelConfig& c, const std::map<std::string, std::vector<int64_t>>& shapes,
                      const std::string& file) const override {
    std::vector<int64_t> channels, kernels, widths;
    int64_t in_channels = 0, features = 0;
    for (int i = 1;; ++i) {
      auto it = shapes.find("conv" + std::to_string(i) + ".weight");
      if (it == shapes.end()) break;
      require(it->second.size() == 4, file + ": conv" + std::to_string(i) + ".weight is not [out, in, kh, kw]");
      if (i == 1) in_channels = it->second[1];
      channels.push_back(it->second[0]);
      kernels.push_back(it->second[2]);
    }
    for (int j = 1;; ++j) {
      auto it = shapes.find("fc" + std::to_string(j) + ".weight");
      if (it == shapes.end()) break;
      require(it->second.size() == 2, file + ": fc" + std::to_string(j) + ".weight is not [out, in]");
      if (j == 1) features = it->second[1];
      widths.push_back(it->second[0]);
    }
    require(!channels.empty() && !widths.empty(),
            file + ": it holds no conv1.weight and fc1.weight: it is not a model of model.kind = cnn");
    c.values["in_channels"] = in_channels;
    c.values["channels"] = list_text(channels);
    c.values["kernel"] = list_text(kernels);
    c.values["classes"] = widths.back();
    widths.pop_back();
    c.values["hidden"] = list_text(widths);
    const CnnConfig t = config(c);
    if (t.height > 0 && t.width > 0) return;
    for (int64_t side = 1; side <= 4096; ++side) {
      CnnConfig s = t;
      s.height = s.width = side;
      try {
        s.validate(false);
      } catch (const Error&) {
        continue;
      }
      if (s.shapes().features == features) {
        c.values["height"] = side;
        c.values["width"] = side;
        return;
      }
    }
    throw Error(file + ": no square image size gives fc1's " + std::to_string(features) + " input features with " +
                "model.padding = " + std::to_string(t.padding) + " and model.pool = " + std::to_string(t.pool) +
                ": give model.height and model.width (and the padding and pool it was trained with)");
  }

  SampleShape sample_shape(const ModelConfig& c) const override {
    const CnnConfig t = config(c);
    return {InputKind::images, t.in_channels * t.height * t.width, 1};  // pixels in; one class label
  }
  Metric metric() const override { return Metric::accuracy; }
  // Whether dropout is on at all (each unit applies its own rate: model.conv_dropout, model.dropout).
  float dropout(const ModelConfig& c) const override {
    const CnnConfig t = config(c);
    return std::max(t.conv_dropout, t.dropout);
  }
  std::string describe(const ModelConfig& c) const override {
    const CnnConfig t = config(c);
    return std::to_string(t.in_channels) + "×" + std::to_string(t.height) + "×" + std::to_string(t.width) +
           " images, convolutions " + list_text(t.conv_channels()) + " (kernel " + list_text(t.kernels()) +
           ")" + (t.pool > 1 ? ", max-pool " + std::to_string(t.pool) : "") + ", hidden " +
           (t.hidden_widths().empty() ? "none" : list_text(t.hidden_widths())) + ", " + std::to_string(t.classes) +
           " classes" + (t.activation == "relu" ? "" : ", " + t.activation);
  }
  UnitList units(const ModelConfig& c, ComputeDevice& device, TpSlice slice, TpRegions&,
                 SequenceAttention* sequence, ExpertExchange* experts) const override {
    refuse_expert_parallel(name(), experts);
    require(!sequence, "parallel.cp > 1 splits sequences, and model.kind = cnn has none (an image is one row): "
                       "use parallel.cp = 1 for the CNN");
    return cnn_units(config(c), device, slice);
  }
};

}  // namespace

UnitList cnn_units(const CnnConfig& c, ComputeDevice& device, TpSlice slice) {
  require(slice.count == 1, "parallel.tp = " + std::to_string(slice.count) +
                                ": model.kind = cnn has no tensor-parallel regions: use data parallel "
                                "(parallel.dp_shard / dp_replicate) or pipeline parallel (parallel.pp), or set "
                                "parallel.tp=1");
  c.validate();
  UnitList l;
  l.sample = {InputKind::images, c.in_channels * c.height * c.width, 1};
  const CnnConfig::Shapes s = c.shapes();
  for (int i = 0; i < int(s.convs.size()); ++i) l.modules.push_back(std::make_unique<ConvUnit>(device, c, i));
  const std::vector<int64_t> hidden = c.hidden_widths();
  int64_t in = s.features;
  for (int j = 0; j < int(hidden.size()); ++j) {
    l.modules.push_back(std::make_unique<DenseUnit>(device, c, j, uint32_t(s.convs.size() + size_t(j)), in, hidden[size_t(j)]));
    in = hidden[size_t(j)];
  }
  EmbedHeadShape head;  // the last linear layer and the loss: a classifier over the classes, one row per sample
  head.vocab_size = c.classes;
  head.seq_len = 1;
  head.dim = in;
  head.positions = EmbedHeadShape::Positions::none;
  head.final_norm = EmbedHeadShape::FinalNorm::none;
  head.head_bias = true;
  head.head_init = Init::fan_in_uniform;
  head.head = "fc" + std::to_string(hidden.size() + 1);
  l.modules.push_back(std::make_unique<ClassifierHead>(device, head, nullptr));
  return l;
}

const ModelKind& cnn_kind() {
  static const CnnKind kind;
  return kind;
}

}  // namespace dtrain

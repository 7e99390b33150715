// CnnConfig: its key table, its lists and validation.
#include "models/cnn/config.hpp"

#include <sstream>

#include "core/error.hpp"
#include "models/model_kinds.hpp"

namespace dtrain {

namespace {

// "32,64" → {32, 64}; "" → {}. Error naming the key when an entry is not a positive whole number.
std::vector<int64_t> parse_list(const std::string& key, const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    const std::string v = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    int64_t n = 0;
    size_t used = 0;
    try {
      n = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(!v.empty() && used == v.size() && n > 0 && n <= (1 << 16),
            "model." + key + " = \"" + text + "\": \"" + v + "\" is not a positive whole number up to 65536: give "
            "comma-separated numbers, e.g. model." + key + "=\"32,64\"");
    out.push_back(n);
  }
  return out;
}

}  // namespace

const ConfigKeyTable<CnnConfig>& cnn_keys() {
  static const ConfigKeyTable<CnnConfig> k = {
      DT_INT_KEY("model.in_channels", in_channels, 0, 1 << 16,
                 "channels of an input image; 0: taken from the data (a value the data contradicts is refused)"),
      DT_INT_KEY("model.height", height, 0, 1 << 16, "input image height in pixels; 0: taken from the data"),
      DT_INT_KEY("model.width", width, 0, 1 << 16, "input image width in pixels; 0: taken from the data"),
      DT_INT_KEY("model.classes", classes, 0, 1 << 20, "classes to tell apart; 0: taken from the data"),
      DT_STRING_KEY("model.channels", channels,
                    "output channels of each convolution, comma-separated (\"32,64\": two convolutions)"),
      DT_STRING_KEY("model.kernel", kernel,
                    "kernel size of each convolution, comma-separated, or one size for all (\"3\")"),
      DT_INT_KEY("model.padding", padding, 0, 1 << 10, "zero padding on each side of every convolution's input"),
      DT_INT_KEY("model.pool", pool, 1, 1 << 10, "max pooling window (and stride) after the last convolution; 1: none"),
      DT_STRING_KEY("model.hidden", hidden,
                    "widths of the hidden linear layers before the classifier, comma-separated (\"\": none)"),
      DT_FLOAT_KEY("model.conv_dropout", conv_dropout, "dropout probability after the last convolution (and its pooling), 0 to below 1"),
      DT_FLOAT_KEY("model.dropout", dropout, "dropout probability after each hidden linear layer, 0 to below 1"),
      DT_CHOICE_KEY("model.activation", activation, "relu|gelu",
                    "activation after each convolution and hidden linear layer (gelu: the tanh approximation)"),
  };
  return k;
}

CnnConfig cnn_config(const ModelConfig& c) { return config_from(c, cnn_keys()); }

std::vector<int64_t> CnnConfig::conv_channels() const { return parse_list("channels", channels); }
std::vector<int64_t> CnnConfig::hidden_widths() const { return parse_list("hidden", hidden); }

std::vector<int64_t> CnnConfig::kernels() const {
  std::vector<int64_t> k = parse_list("kernel", kernel);
  const size_t convs = conv_channels().size();
  if (k.size() == 1) k.assign(convs, k[0]);
  return k;
}

CnnConfig::Shapes CnnConfig::shapes() const {
  Shapes s;
  const std::vector<int64_t> ch = conv_channels(), ks = kernels();
  int64_t c = in_channels, h = height, w = width;
  for (size_t i = 0; i < ch.size() && i < ks.size(); ++i) {
    ConvShape cs;
    cs.N = 1;
    cs.C = c;
    cs.H = h;
    cs.W = w;
    cs.K = ch[i];
    cs.R = cs.S = ks[i];
    cs.pad = padding;
    s.convs.push_back(cs);
    c = cs.K;
    h = cs.P();
    w = cs.Q();
  }
  s.pooled = pool > 1;
  if (s.pooled) {
    s.pool.N = 1;
    s.pool.C = c;
    s.pool.H = h;
    s.pool.W = w;
    s.pool.kernel = s.pool.stride = pool;
    h = s.pool.P();
    w = s.pool.Q();
  }
  s.features = c * h * w;
  return s;
}

void CnnConfig::validate(bool data_known) const {
  const std::vector<int64_t> ch = conv_channels(), ks = parse_list("kernel", kernel);
  hidden_widths();
  require(!ch.empty(), "model.channels is empty: a CNN needs at least one convolution, e.g. model.channels=\"32,64\"");
  require(ks.size() == 1 || ks.size() == ch.size(),
          "model.kernel = \"" + kernel + "\" gives " + std::to_string(ks.size()) + " sizes for " +
              std::to_string(ch.size()) + " convolutions (model.channels = \"" + channels +
              "\"): give one size for all, or one per convolution");
  for (const float p : {conv_dropout, dropout})
    require(p >= 0.0f && p < 1.0f, "model.dropout and model.conv_dropout must lie in [0, 1): " + std::to_string(p) +
                                       " is outside; use a rate such as 0.5, or 0");
  const bool sized = in_channels > 0 && height > 0 && width > 0;
  if (!data_known && !sized) return;
  auto pos = [](const char* key, int64_t v) {
    require(v > 0, std::string("model.") + key + " = " + std::to_string(v) +
                       " must be positive: it is taken from the data, or set it with --set model." + key + "=N");
  };
  pos("in_channels", in_channels);
  pos("height", height);
  pos("width", width);
  if (data_known) pos("classes", classes);
  if (data_known) require(classes >= 2, "model.classes = " + std::to_string(classes) +
                                            ": a classifier needs at least 2 classes");
  // each convolution (and the pooling) must leave at least one pixel
  int64_t h = height, w = width;
  for (size_t i = 0; i < ch.size(); ++i) {
    const int64_t k = ks.size() == 1 ? ks[0] : ks[i];
    require(h + 2 * padding >= k && w + 2 * padding >= k,
            "convolution " + std::to_string(i + 1) + "'s kernel " + std::to_string(k) + " is larger than its " +
                std::to_string(h) + "×" + std::to_string(w) + " input (padding " + std::to_string(padding) +
                "): use smaller kernels, fewer convolutions or more model.padding");
    h = h + 2 * padding - k + 1;
    w = w + 2 * padding - k + 1;
  }
  require(pool <= h && pool <= w, "model.pool = " + std::to_string(pool) + " is larger than the last convolution's " +
                                      std::to_string(h) + "×" + std::to_string(w) + " output: use a smaller pool");
}

}  // namespace dtrain

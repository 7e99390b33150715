// Hugging Face tokenizer.json files whose model is byte-level BPE (GPT-2, Llama 3, Qwen style): the
// fields dtrain reads, and one Error line naming the file and the field for what it does not read.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/tokenizer/bpe_encodings.hpp"
#include "data/tokenizer/byte_alphabet.hpp"
#include "data/tokenizer/byte_level_bpe.hpp"
#include "data/tokenizer/kinds.hpp"

namespace dtrain {

namespace {

using JsonTree = nlohmann::json;  // std::map objects: a vocabulary of 10^5 keys parses in linear-log time

[[noreturn]] void refuse_json(const std::string& path, const std::string& what) {
  throw Error("tokenizer " + path + ": " + what);
}

// obj[key], nullptr when absent or null.
const JsonTree* field(const JsonTree& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool flag_field(const JsonTree& obj, const char* key, bool fallback, const std::string& path, const std::string& where) {
  const JsonTree* v = field(obj, key);
  if (!v) return fallback;
  if (!v->is_boolean()) refuse_json(path, where + key + " is " + v->dump() + ", not true or false");
  return v->get<bool>();
}

std::string text_field(const JsonTree& obj, const char* key, const std::string& path, const std::string& where) {
  const JsonTree* v = field(obj, key);
  if (!v || !v->is_string()) refuse_json(path, where + key + " should be a string");
  return v->get<std::string>();
}

void check_model_fields(const JsonTree& model, const std::string& path) {
  if (!model.is_object()) refuse_json(path, "it has no model object: is it a tokenizer.json?");
  if (const JsonTree* type = field(model, "type"); type && *type != "BPE")
    refuse_json(path, "model.type " + type->dump() + " is not supported: dtrain reads byte-level BPE (model.type "
                      "\"BPE\") from a tokenizer.json (for a SentencePiece model give its tokenizer.model)");
  if (const JsonTree* dropout = field(model, "dropout"); dropout && !(dropout->is_number() && *dropout == 0))
    refuse_json(path, "model.dropout " + dropout->dump() + " is not supported: dtrain encodes deterministically "
                      "(set it to null)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const JsonTree* v = field(model, key); v && *v != "")
      refuse_json(path, std::string("model.") + key + " " + v->dump() + " is not supported: byte-level BPE has "
                        "none (null)");
  if (flag_field(model, "byte_fallback", false, path, "model."))
    refuse_json(path, "model.byte_fallback true is not supported: byte-level BPE encodes every byte without "
                      "it (byte fallback is for SentencePiece-style BPE: give that model's tokenizer.model)");
  if (!field(model, "vocab") || !model["vocab"].is_object()) refuse_json(path, "model.vocab should be an object");
  if (!field(model, "merges") || !model["merges"].is_array()) refuse_json(path, "model.merges should be an array");
}

// A Split pattern as a regex: {"Regex": "..."} as it is, {"String": "..."} escaped.
std::string split_pattern(const JsonTree& split, const std::string& path, const std::string& where) {
  const JsonTree* pattern = field(split, "pattern");
  if (pattern && pattern->contains("Regex")) return text_field(*pattern, "Regex", path, where + "pattern.");
  if (!pattern || !pattern->contains("String"))
    refuse_json(path, where + "pattern should be {\"Regex\": ...} or {\"String\": ...}");
  std::string escaped;
  for (const char c : text_field(*pattern, "String", path, where + "pattern.")) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return escaped;
}

void add_pre_tokenizer_steps(const JsonTree& pre, const std::string& path, const std::string& where,
                             std::vector<PreTokenizerStep>& steps) {
  const std::string type = text_field(pre, "type", path, where);
  if (type == "Sequence") {
    const JsonTree* list = field(pre, "pretokenizers");
    if (!list || !list->is_array()) refuse_json(path, where + "pretokenizers should be an array");
    for (size_t i = 0; i < list->size(); ++i)
      add_pre_tokenizer_steps((*list)[i], path, where + "pretokenizers[" + std::to_string(i) + "].", steps);
  } else if (type == "ByteLevel") {
    if (flag_field(pre, "add_prefix_space", false, path, where)) steps.push_back({nullptr, true});
    if (flag_field(pre, "use_regex", true, path, where))
      steps.push_back({std::make_shared<PieceRegex>(std::string(kGpt2PiecePattern), path), false});
  } else if (type == "Split") {
    const JsonTree* behavior = field(pre, "behavior");
    if (!behavior || *behavior != "Isolated")
      refuse_json(path, where + "behavior " + (behavior ? behavior->dump() : "null") +
                        " is not supported: dtrain's Split keeps each match as a piece (\"Isolated\")");
    if (flag_field(pre, "invert", false, path, where))
      refuse_json(path, where + "invert true is not supported (Split by the matches: false)");
    steps.push_back({std::make_shared<PieceRegex>(split_pattern(pre, path, where), path), false});
  } else {
    refuse_json(path, where + "type \"" + type + "\" is not supported: dtrain reads ByteLevel, Split (behavior "
                      "Isolated) and a Sequence of them");
  }
}

std::vector<PreTokenizerStep> pre_tokenizer_steps(const JsonTree& tree, const std::string& path) {
  std::vector<PreTokenizerStep> steps;
  if (const JsonTree* pre = field(tree, "pre_tokenizer")) add_pre_tokenizer_steps(*pre, path, "pre_tokenizer.", steps);
  return steps;
}

// model.vocab: each token's text by id, and the id of each text.
struct JsonVocabulary {
  std::vector<std::string> texts;  // by id; "" for an id no token has
  std::unordered_map<std::string, uint32_t> ids;
};

JsonVocabulary read_json_vocabulary(const JsonTree& vocab, const std::string& path) {
  JsonVocabulary v;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= (uint64_t(1) << 31))
      refuse_json(path, "model.vocab: the id of " + JsonTree(text).dump() + " is " + id.dump() +
                        ", not an id from 0 to 2^31-1");
    const auto i = id.get<uint32_t>();
    if (v.texts.size() <= i) v.texts.resize(size_t(i) + 1);
    if (!v.texts[i].empty())
      refuse_json(path, "model.vocab gives id " + std::to_string(i) + " to two tokens, " + JsonTree(v.texts[i]).dump() +
                        " and " + JsonTree(text).dump());
    if (text.empty()) refuse_json(path, "model.vocab has an empty token (id " + std::to_string(i) + ")");
    v.texts[i] = text;
    v.ids.emplace(text, i);
  }
  return v;
}

// The two tokens of merge `rank`: "a b" (split at its one space) or ["a", "b"].
std::pair<std::string, std::string> merge_halves(const JsonTree& merge, size_t rank, const std::string& path) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    const std::string& s = merge.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  refuse_json(path, "model.merges[" + std::to_string(rank) + "] is " + merge.dump() +
                    ", not \"a b\" or [\"a\", \"b\"]");
}

// model.merges: rank = place in the list (a pair listed twice keeps its later rank, as Hugging Face does).
PairMergeTable read_json_merges(const JsonTree& merges, const JsonVocabulary& vocab, const std::string& path) {
  PairMergeTable table;
  auto id_of = [&](const std::string& text, size_t rank) {
    const auto it = vocab.ids.find(text);
    if (it == vocab.ids.end())
      refuse_json(path, "model.merges[" + std::to_string(rank) + "] needs the token " + JsonTree(text).dump() +
                        ", which model.vocab lacks");
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_halves(merges[rank], rank, path);
    table.set(id_of(left, rank), id_of(right, rank), {uint32_t(rank), id_of(left + right, rank)});
  }
  return table;
}

std::vector<AddedToken> read_added_tokens(const JsonTree& tree, const std::string& path) {
  std::vector<AddedToken> tokens;
  const JsonTree* list = field(tree, "added_tokens");
  if (!list) return tokens;
  if (!list->is_array()) refuse_json(path, "added_tokens should be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const JsonTree& t = (*list)[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "].";
    const JsonTree* id = t.is_object() ? field(t, "id") : nullptr;
    if (!id || !id->is_number_unsigned() || id->get<uint64_t>() >= (uint64_t(1) << 31))
      refuse_json(path, where + "id should be an id from 0 to 2^31-1");
    AddedToken token;
    token.id = id->get<uint32_t>();
    token.content = text_field(t, "content", path, where);
    token.special = flag_field(t, "special", false, path, where);
    token.normalized = flag_field(t, "normalized", !token.special, path, where);
    token.lstrip = flag_field(t, "lstrip", false, path, where);
    token.rstrip = flag_field(t, "rstrip", false, path, where);
    token.single_word = flag_field(t, "single_word", false, path, where);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// The BPE tables of model.vocab and model.merges. Vocabulary text outside GPT-2's byte alphabet goes
// to decode_only (no merge can reach it).
std::unique_ptr<BytePairEncoder> json_encoder(const JsonTree& model, const std::string& path,
                                              std::unordered_map<uint32_t, std::string>& decode_only) {
  const JsonVocabulary vocab = read_json_vocabulary(model["vocab"], path);
  BpeVocabulary bpe;
  bpe.merges = read_json_merges(model["merges"], vocab, path);
  bpe.whole_piece_first = flag_field(model, "ignore_merges", false, path, "model.");
  bpe.token_bytes.resize(vocab.texts.size());
  for (size_t id = 0; id < vocab.texts.size(); ++id) {
    if (vocab.texts[id].empty()) continue;
    if (auto bytes = bytes_of_alphabet_text(vocab.texts[id]))
      bpe.token_bytes[id] = std::move(*bytes);
    else
      decode_only.emplace(uint32_t(id), vocab.texts[id]);
  }
  auto encoder = std::make_unique<BytePairEncoder>(std::move(bpe));
  if (const int missing = encoder->first_missing_byte(); missing >= 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%02X", missing);
    refuse_json(path, std::string("model.vocab has no token for the byte ") + hex + " (" +
                      alphabet_text_of_bytes(std::string(1, char(missing))) +
                      " in GPT-2's byte alphabet): byte-level BPE needs one for each of the 256 bytes");
  }
  return encoder;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path, const std::string& bytes) {
  JsonTree tree;
  try {
    tree = JsonTree::parse(bytes);
  } catch (const JsonTree::parse_error& e) {
    refuse_json(path, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!tree.is_object()) refuse_json(path, "a tokenizer.json should hold one JSON object");
  if (const JsonTree* normalizer = field(tree, "normalizer"))
    refuse_json(path, "normalizer " + (normalizer->contains("type") ? (*normalizer)["type"].dump() : normalizer->dump()) +
                      " is not supported: dtrain reads tokenizer.json files without a normalizer (null), as "
                      "GPT-2's and Llama 3's are");
  const JsonTree* model = field(tree, "model");
  if (!model) refuse_json(path, "it has no model object: is it a tokenizer.json?");
  check_model_fields(*model, path);
  ByteLevelBpeParts parts;
  parts.path = path;
  parts.kind = "bpe";
  parts.origin = "tokenizer.json";
  parts.pre_tokenizer = pre_tokenizer_steps(tree, path);
  parts.encoder = json_encoder(*model, path, parts.decode_only);
  parts.added_tokens = read_added_tokens(tree, path);
  return make_byte_level_bpe(std::move(parts));
}

}  // namespace dtrain

// Byte-level BPE (tokenizer.json, tiktoken rank files): being written (issue 39); refused until then.
#include "core/error.hpp"
#include "data/tokenizer/kinds.hpp"

namespace dtrain {

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path, const std::string&) {
  throw Error("tokenizer " + path + ": byte-level BPE from tokenizer.json is not supported by this build yet");
}
std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string&) {
  throw Error("tokenizer " + path + ": tiktoken rank files are not supported by this build yet");
}

}  // namespace dtrain

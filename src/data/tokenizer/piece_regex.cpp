// PieceRegex through PCRE2 (see piece_regex.hpp). One match_data per call keeps split thread-safe
// on a shared, read-only compiled pattern; a match that runs out of PCRE2's default JIT stack or
// match limits is tried again with generous ones.
#include "data/tokenizer/piece_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "core/error.hpp"

namespace dtrain {

namespace {

// Unicode White_Space as a class body in PCRE2 syntax.
constexpr std::string_view kWhiteSpaceClass =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

bool is_resource_error(int rc) {
  return rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
         rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_NOMEMORY;
}

// A match context with a large JIT stack and no practical match limits, for the rare match (a huge
// piece of text) that the defaults cannot finish. Made per use, so never shared between threads.
struct GenerousLimits {
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 512 * 1024 * 1024, nullptr);
  GenerousLimits() {
    if (jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
    pcre2_set_match_limit(context, ~uint32_t(0));
    pcre2_set_depth_limit(context, ~uint32_t(0));
    pcre2_set_heap_limit(context, ~uint32_t(0));
  }
  ~GenerousLimits() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
  }
};

using MatchData = std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)>;

// pcre2_match, tried again with generous limits when the defaults run out; Error on other failures.
int run_match(const pcre2_code* code, std::string_view text, size_t offset, uint32_t options, pcre2_match_data* md,
              const std::string& source) {
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), offset, options, md, nullptr);
  if (is_resource_error(rc)) {
    GenerousLimits limits;
    rc = pcre2_match(code, subject, text.size(), offset, options, md, limits.context);
  }
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
    throw Error("tokenizer " + source + ": its pre-tokenizer regex failed on a text of " + std::to_string(text.size()) +
                " bytes (" + pcre2_message(rc) + ")");
  return rc;
}

}  // namespace

std::string with_rust_white_space(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const char after = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c == '\\' && i + 1 < pattern.size()) {
      ++i;
      if (after == 's')
        out += in_class ? std::string(kWhiteSpaceClass) : "[" + std::string(kWhiteSpaceClass) + "]";
      else if (after == 'S' && !in_class)  // inside a class \S stays PCRE2's: a class cannot hold a complement
        out += "[^" + std::string(kWhiteSpaceClass) + "]";
      else
        out += {c, after};
    } else if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a leading ']' is literal
    } else if (in_class && c == '[' && after == ':') {  // a POSIX class such as [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i, stop - i);
      i = stop - 1;
    } else {
      if (in_class && c == ']') in_class = false;
      out += c;
    }
  }
  return out;
}

PieceRegex::PieceRegex(const std::string& pattern, const std::string& source) : pattern_(pattern), source_(source) {
  const std::string rewritten = with_rust_white_space(pattern);
  int error = 0;
  PCRE2_SIZE error_at = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_at, nullptr);
  if (!code)
    throw Error("tokenizer " + source + ": its pre-tokenizer regex " + pattern + " does not compile (" +
                pcre2_message(error) + ", near byte " + std::to_string(error_at) + " of PCRE2's rewriting " +
                rewritten + ")");
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where JIT is missing, the interpreter gives the same matches
  code_ = code;
}

PieceRegex::~PieceRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void PieceRegex::split(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  const auto* code = static_cast<const pcre2_code*>(code_);
  MatchData md(pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  if (!md) throw std::bad_alloc();
  size_t search_from = 0, covered = 0;  // where the next search starts; the end of the last piece
  uint32_t options = 0;
  while (search_from <= text.size()) {
    if (run_match(code, text, search_from, options, md.get(), source_) == PCRE2_ERROR_NOMATCH) break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md.get());
    const size_t start = ovector[0], end = ovector[1];
    if (start > covered) piece(text.substr(covered, start - covered));
    covered = std::max(covered, start);
    if (end > start) {
      piece(text.substr(start, end - start));
      covered = search_from = end;
      options = 0;
    } else {  // an empty match adds nothing; look again from there for one that is not empty
      search_from = start;
      options = PCRE2_NOTEMPTY_ATSTART;
    }
  }
  if (covered < text.size()) piece(text.substr(covered));
}

long PieceRegex::match_length_at(std::string_view text, size_t offset) const {
  const auto* code = static_cast<const pcre2_code*>(code_);
  MatchData md(pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  if (!md) throw std::bad_alloc();
  if (run_match(code, text, offset, PCRE2_ANCHORED, md.get(), source_) == PCRE2_ERROR_NOMATCH) return -1;
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md.get());
  return long(ovector[1] - ovector[0]);
}

}  // namespace dtrain

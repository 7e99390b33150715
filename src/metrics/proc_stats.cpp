// /proc parsers and reader (see proc_stats.hpp).
#include "metrics/proc_stats.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <vector>

namespace dtrain {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Skips spaces and tabs at `pos`.
void skip_blanks(std::string_view s, size_t& pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
}

// The whole number at `pos` (after blanks), advancing past it.
std::optional<int64_t> read_int(std::string_view s, size_t& pos) {
  skip_blanks(s, pos);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), v);
  if (ec != std::errc()) return std::nullopt;
  pos = size_t(end - s.data());
  return v;
}

// The whole number after "name:" at the start of a line of `text` (status and io are such lines).
std::optional<int64_t> field(std::string_view text, std::string_view name) {
  size_t line = 0;
  while (line < text.size()) {
    const size_t end = std::min(text.find('\n', line), text.size());
    const std::string_view l = text.substr(line, end - line);
    if (l.size() > name.size() && l.substr(0, name.size()) == name && l[name.size()] == ':') {
      size_t pos = name.size() + 1;
      return read_int(l, pos);
    }
    line = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcCpuTicks> parse_proc_stat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // Fields after the name, numbered from 3 (the state, one letter); utime is 14, stime 15,
  // starttime 22.
  std::vector<std::string_view> fields;
  size_t pos = close + 1;
  while (fields.size() < 20) {
    skip_blanks(text, pos);
    const size_t end = text.find_first_of(" \t\n", pos);
    const size_t stop = end == std::string_view::npos ? text.size() : end;
    if (stop == pos) break;
    fields.push_back(text.substr(pos, stop - pos));
    pos = stop;
  }
  if (fields.size() < 20) return std::nullopt;
  auto number = [&](int field_no) -> std::optional<int64_t> {
    const std::string_view f = fields[size_t(field_no - 3)];
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (ec != std::errc() || end != f.data() + f.size()) return std::nullopt;
    return v;
  };
  const auto user = number(14), system = number(15), start = number(22);
  if (!user || !system || !start) return std::nullopt;
  return ProcCpuTicks{*user, *system, *start};
}

ProcStatus parse_proc_status(std::string_view text) {
  ProcStatus s;
  if (const auto kib = field(text, "VmRSS")) s.rss_mb = double(*kib) * 1024.0 / kMiB;
  if (const auto n = field(text, "Threads")) s.threads = int(*n);
  return s;
}

std::optional<ProcIo> parse_proc_io(std::string_view text) {
  const auto read = field(text, "read_bytes"), written = field(text, "write_bytes");
  if (!read || !written) return std::nullopt;
  return ProcIo{double(*read) / kMiB, double(*written) / kMiB};
}

std::optional<double> parse_proc_uptime(std::string_view text) {
  size_t pos = 0;
  skip_blanks(text, pos);
  double v = 0.0;
  const auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

std::optional<std::string> read_proc_file(const char* path) {
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> f(std::fopen(path, "re"));
  if (!f) return std::nullopt;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) return std::nullopt;  // e.g. EACCES on read, as /proc/self/io can give
  return text;
}

}  // namespace dtrain

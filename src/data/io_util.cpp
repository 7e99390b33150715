// Small text helpers shared by the data layer (see io_util.hpp).
#include "data/io_util.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace dtrain::data_io {

void for_each_line(const std::string& path, const std::function<void(std::string_view)>& fn) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("cannot read " + path + ": it is a folder, not a text file; pass a file or a folder of text files");
  require_regular_file(path, "text file");  // a pipe would block forever, a device never end
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read " + path + " (" + std::strerror(errno) + "): check that the file exists and is readable");
  }
  std::string line;
  while (std::getline(in, line)) {
    std::string_view v(line);
    if (!v.empty() && v.back() == '\r') v.remove_suffix(1);
    fn(v);
  }
  if (in.bad()) {
    throw Error("error while reading " + path + " (" + std::strerror(errno) +
                "): check the file and the disk it is on");
  }
}

bool is_blank(std::string_view line) {
  for (char c : line)
    if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')) return false;
  return true;
}

}  // namespace dtrain::data_io

// Shared helpers of the data-layer unit tests: temporary folders, small files, error checks.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/prepare.hpp"
#include "data/sampler.hpp"
#include "data/token_file.hpp"
#include "data/vocab.hpp"

namespace fs = std::filesystem;
using namespace dtrain;

namespace data_test {


// A fresh folder under /tmp, removed with its contents at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dtrain_test_data_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (!p) throw std::runtime_error("mkdtemp failed");
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Expects `fn` to throw dtrain::Error whose one-line message contains `needle`.
template <class F>
inline void expect_error(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected dtrain::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message must be one line: " << msg;
  }
}

inline std::vector<uint32_t> tokens_of(const TokenFile& f) { return std::vector<uint32_t>(f.data(), f.data() + f.size()); }

}  // namespace data_test

using namespace data_test;

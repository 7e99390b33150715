// Test helper: the message of the dtrain::Error a call throws, "" when it throws none.
#pragma once
#include <string>

#include "core/error.hpp"

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const dtrain::Error& e) {
    return e.what();
  }
  return "";
}

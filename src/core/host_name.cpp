// host_name (see host_name.hpp).
#include "core/host_name.hpp"

#include <unistd.h>

namespace dtrain {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace dtrain

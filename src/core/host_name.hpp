// This machine's host name, as the logs, lock files and event-file names show it.
#pragma once
#include <string>

namespace dtrain {

// gethostname(), or "localhost" when it fails or is empty.
std::string host_name();

}  // namespace dtrain

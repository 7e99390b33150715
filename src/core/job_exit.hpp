// Exit statuses a dtrain worker and its launcher agree on.
#pragma once

namespace dtrain {

// The workers of an elastic job stopped after a checkpoint because dtrun has nodes waiting to join:
// not a failure; dtrun restarts them with the new nodes (EX_TEMPFAIL's number).
constexpr int kExitForNewNodes = 75;

}  // namespace dtrain

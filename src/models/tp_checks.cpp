// require_tp_divides (see tp_checks.hpp).
#include "models/tp_checks.hpp"

#include "core/error.hpp"

namespace dtrain {

void require_tp_divides(int slices, const std::string& what, int64_t value, const std::string& fix) {
  require(value % slices == 0, "parallel.tp = " + std::to_string(slices) + " does not divide " + what + " = " +
                                   std::to_string(value) + ": " + fix);
}

void require_tp_divides_seq_len(int slices, int64_t seq_len) {
  require_tp_divides(slices, "model.seq_len", seq_len,
                     "sequence parallel splits each sample's positions: choose a tp that divides seq_len, or set "
                     "parallel.tp_sequence=false");
}

}  // namespace dtrain

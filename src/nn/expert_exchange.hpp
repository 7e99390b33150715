// Where a mixture of experts' tokens meet experts held on other ranks (expert parallel, DESIGN §3.9):
// in one process every expert is here and a MoeLayer needs none of this; under expert parallel each
// of `ranks()` ranks holds an equal share of the experts, and src/parallel/ep implements this over
// the expert-parallel group (all-to-alls, counts first). Model code stays free of ranks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  virtual int ranks() const = 0;  // ranks the experts are split over
  virtual int rank() const = 0;   // this rank holds experts [rank · E / ranks, (rank + 1) · E / ranks)
  // send: ranks() blocks of `per_rank` counts, block j for rank j; recv: block j from rank j.
  virtual void exchange_counts(const int64_t* send, int64_t* recv, int64_t per_rank) = 0;
  // Rows of `width` floats: send holds send_rows[j] rows for rank j, one block after another; recv
  // receives recv_rows[j] rows from rank j, likewise (known beforehand: exchange the counts first).
  virtual void exchange_rows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                             const std::vector<int64_t>& recv_rows, int64_t width) = 0;
};

}  // namespace dtrain

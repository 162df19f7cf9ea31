// The data functions' view of a rank's receive region before the call.
#include "perf/common.h"

namespace weft::perf {

Expect DataView::unchanged(size_t k) const {
  if (inPlace) {
    int64_t j = static_cast<int64_t>(k) - sendStart_;
    if (j >= 0 && static_cast<size_t>(j) < sendCount_)
      return {coll_->input(*this, static_cast<size_t>(j)), 0};
  }
  return {0, 0};
}

}  // namespace weft::perf

#include "src/common/clock.h"

#include "src/common/env.h"

namespace weft {

std::chrono::milliseconds defaultTimeout() {
  static const std::chrono::milliseconds t(env::getInt("WEFT_TIMEOUT_MS"));
  return t;
}

}  // namespace weft

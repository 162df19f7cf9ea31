#include "src/core/comm_config.h"

namespace weft::core {

CommConfig configFromEnv() {
  CommConfig c;
  c.tuning = Tuning::fromEnvironment();
  return c;
}

}  // namespace weft::core

// Logging of dropped unauthenticated connections. Strangers can open connections as fast as
// they like: each drop is logged at INFO, and only the first and then one in kEvery as a warning
// (with the running count), so a flood cannot flood the log as well.
#pragma once
#include <cstdint>
#include <string>

#include "src/common/log.h"

namespace weft::bootstrap {

class DropLog {
 public:
  static constexpr uint64_t kEvery = 256;

  void note(const std::string& message) {
    if (count_++ % kEvery == 0)
      WEFT_WARN(BOOTSTRAP, "%s (%llu unauthenticated connections dropped so far)", message.c_str(),
                static_cast<unsigned long long>(count_));
    else
      WEFT_INFO(BOOTSTRAP, "%s", message.c_str());
  }

 private:
  uint64_t count_ = 0;
};

}  // namespace weft::bootstrap

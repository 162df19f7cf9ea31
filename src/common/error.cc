#include "src/common/error.h"

#include <cstring>

namespace weft {

const char* statusName(Status s) {
  switch (s) {
    case Status::kSuccess:
      return "success";
    case Status::kUnhandledCudaError:
      return "cuda error";
    case Status::kSystemError:
      return "system error";
    case Status::kInternalError:
      return "internal error";
    case Status::kInvalidArgument:
      return "invalid argument";
    case Status::kInvalidUsage:
      return "invalid usage";
    case Status::kRemoteError:
      return "remote error";
    case Status::kInProgress:
      return "in progress";
  }
  return "unknown";
}

std::string sysError(const std::string& what, int err) {
  char buf[256];
  const char* msg = strerror_r(err, buf, sizeof(buf));
  return what + ": " + msg + " (errno " + std::to_string(err) + ")";
}

}  // namespace weft

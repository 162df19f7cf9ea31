// Typed errors for setup paths and status codes for hot paths.
#pragma once
#include <stdexcept>
#include <string>

namespace weft {

// Mirrors ncclResult_t values so the C ABI layer can cast directly.
enum class Status : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

const char* statusName(Status s);

// Thrown by setup code; converted to a Status at the C ABI boundary.
class Error : public std::runtime_error {
 public:
  Error(Status code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  Status code() const { return code_; }

 private:
  Status code_;
};

// Formats "what: strerror(errno)" for system-call failures.
std::string sysError(const std::string& what, int err);

[[noreturn]] inline void fail(Status code, std::string message) {
  throw Error(code, std::move(message));
}

}  // namespace weft

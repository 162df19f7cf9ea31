// Failure reporting shared by the perf tools' driver and device layer.
#include "perf/failure.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace weft::perf {

const std::string& hostName() {
  static const std::string name = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return std::string("unknown");
    return std::string(buf);
  }();
  return name;
}

void die(const std::string& msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: Test failure: %s\n", hostName().c_str(), msg.c_str());
  std::fflush(stderr);
  // Other threads may be blocked in collectives whose peers will never come: end the process.
  std::_Exit(2);
}

void ncclCheck(ncclResult_t r, const char* what, const char* file, int line) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  std::string msg = std::string(file) + ":" + std::to_string(line) + " '" + ncclGetErrorString(r) +
                    "' from " + what;
  if (last && *last) msg += ": " + std::string(last);
  std::fflush(stdout);
  std::fprintf(stderr, "%s: Test NCCL failure %s\n", hostName().c_str(), msg.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

}  // namespace weft::perf

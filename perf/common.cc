// perfMain, the entry point of every perf tool, and the failure reporting the driver shares.
#include "perf/common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "perf/driver.h"
#include "perf/mpi.h"
#include "perf/options.h"
#include "perf/world.h"

namespace weft::perf {

Expect DataView::unchanged(size_t k) const {
  if (inPlace) {
    int64_t j = static_cast<int64_t>(k) - sendStart_;
    if (j >= 0 && static_cast<size_t>(j) < sendCount_)
      return {coll_->input(*this, static_cast<size_t>(j)), 0};
  }
  return {0, 0};
}

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

int perfMain(int argc, char** argv, const Collective& coll) {
  setlinebuf(stdout);
  const char* slash = std::strrchr(argv[0], '/');
  const char* program = slash ? slash + 1 : argv[0];
  Options opt;
  int status = parseOptions(argc, argv, program, &opt);
  if (status >= 0) return status;
  ProcessWorld world;
  try {
    if (!mpiStart(&argc, &argv, &world)) world = discoverWorld();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  Driver driver(opt, world, coll, program);
  int code = driver.run();
  mpiStop();
  return code;
}

}  // namespace weft::perf

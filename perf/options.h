// nccl-tests' command line for the perf tools (perf/common.h): the options of one run and their
// parser. Flags the tools do not implement are accepted and noted in the output's header.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/values.h"

namespace weft::perf {

inline constexpr size_t kMiB = 1024 * 1024;

struct Options {
  int nThreads = 1;
  int nGpus = 1;
  size_t minBytes = 32 * kMiB;
  size_t maxBytes = 32 * kMiB;
  size_t stepBytes = 1 * kMiB;
  size_t stepFactor = 1;
  int iters = 20;
  int aggIters = 1;
  int warmupIters = 1;
  int runCycles = 1;
  int parallelInit = 0;
  int check = 1;
  bool allOps = false;
  Op op = Op::kSum;
  bool allTypes = false;
  ncclDataType_t type = ncclFloat32;
  int root = 0;  // -1: every root
  int blocking = 0;
  int streamNull = 0;
  int timeout = 0;
  int reportCpu = 0;
  int average = 1;
  int registerMode = 0;
  int unalign = 0;
  bool hostMemory = false;         // --host: host buffers even where a GPU is present
  double hbmGBps = -1;             // --hbm-gbs: the roofline's bandwidth; -1: the driver's
  std::vector<std::string> notes;  // "# ..." lines for flags the tools do not implement
};

// Parses argv into *o, printing the usage for -h or an unknown flag and a message for a bad value.
// Returns -1 when the run should continue, else the exit status.
int parseOptions(int argc, char** argv, const char* program, Options* o);

}  // namespace weft::perf

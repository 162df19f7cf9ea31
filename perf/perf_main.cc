// perfMain, the entry point of every perf tool.
#include "perf/perf_main.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "perf/driver.h"
#include "perf/mpi.h"
#include "perf/options.h"
#include "perf/world.h"

namespace weft::perf {

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

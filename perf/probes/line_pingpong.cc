// Round trip of one cache line between two cores: the floor under any collective whose ranks
// wait on each other every call (a 2-rank allreduce needs at least half of it per call).
//   line_pingpong [cpuA cpuB [round trips [nt]]]   (default: the first two CPUs this process may
//   use, 2000000 trips; nt: each side stores its flag with a non-temporal store and a fence
//   instead of a release store)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "line_round_trip.h"

int main(int argc, char** argv) {
  int cpuA = 0, cpuB = 1;
  if (argc > 2) {
    cpuA = std::atoi(argv[1]);
    cpuB = std::atoi(argv[2]);
  } else if (!probe::firstTwoCpus(cpuA, cpuB)) {
    std::fprintf(stderr, "line_pingpong: this process may run on fewer than two CPUs\n");
    return 2;
  }
  const long trips = argc > 3 ? std::atol(argv[3]) : 2000000;
  const bool nonTemporal = argc > 4 && std::strcmp(argv[4], "nt") == 0;
  if (trips <= 0) {
    std::fprintf(stderr, "usage: line_pingpong [cpuA cpuB [round trips > 0 [nt]]]\n");
    return 2;
  }
  const probe::RoundTrip rt = probe::lineRoundTrip(cpuA, cpuB, trips, nonTemporal);
  std::printf("cpus %d and %d%s%s: round trip %.1f ns, one way %.1f ns (%ld trips)\n", cpuA, cpuB,
              rt.pinned ? "" : " (not pinned)", nonTemporal ? ", non-temporal flags" : "", rt.ns,
              rt.ns / 2, trips);
  return 0;
}

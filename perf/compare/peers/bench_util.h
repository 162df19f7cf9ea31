// Shared by the peer benchmarks of perf/compare (mpi_bench, gloo_bench): the options, the size
// sweep, how many iterations a size gets, the values each rank sends and expects, and the one
// machine-readable line printed per size.
//
// Sizes follow nccl-tests: allreduce/broadcast = the buffer; allgather = the total output;
// reducescatter = the total input; alltoall = the total a rank sends. busbw = algbw * factor with
// nccl-tests' factors. Values are small integer-valued floats, so every result is exact.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "line_round_trip.h"

namespace cmp {

enum class Coll { allreduce, allgather, reducescatter, broadcast, alltoall };

inline Coll parseColl(const std::string& s) {
  if (s == "allreduce") return Coll::allreduce;
  if (s == "allgather") return Coll::allgather;
  if (s == "reducescatter") return Coll::reducescatter;
  if (s == "broadcast") return Coll::broadcast;
  if (s == "alltoall") return Coll::alltoall;
  throw std::invalid_argument("unknown collective '" + s + "'");
}

inline const char* collName(Coll c) {
  switch (c) {
    case Coll::allreduce:
      return "allreduce";
    case Coll::allgather:
      return "allgather";
    case Coll::reducescatter:
      return "reducescatter";
    case Coll::broadcast:
      return "broadcast";
    case Coll::alltoall:
      return "alltoall";
  }
  return "?";
}

inline double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::allreduce:
      return 2.0 * (n - 1) / n;
    case Coll::broadcast:
      return 1.0;
    default:
      return double(n - 1) / n;
  }
}

// Element count of the size's reference buffer (see the header comment); the split collectives
// need a multiple of nranks. Zero: the size is skipped.
inline size_t totalCount(Coll c, size_t bytes, int n) {
  size_t count = bytes / sizeof(float);
  if (c == Coll::allgather || c == Coll::reducescatter || c == Coll::alltoall) count -= count % n;
  return count;
}

// Rank r's input element i: small integers, distinct per rank, exact in float for any sum here.
inline float inputValue(int r, size_t i) { return float((r + 1) * 10 + int(i % 7)); }
inline float sumValue(int n, size_t i) { return float(10 * n * (n + 1) / 2 + n * int(i % 7)); }

inline size_t parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
    case 'k':
      v *= 1024.0;
      break;
    case 'M':
    case 'm':
      v *= 1024.0 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return size_t(v);
}

struct Options {
  std::string coll = "allreduce";
  std::string algo;           // gloo: ring | ring_chunked | halving_doubling (allreduce)
  std::vector<size_t> sizes;  // -s list, else -b/-e/-f
  size_t minBytes = 8, maxBytes = 128u << 20, factor = 2;
  double budget = 0.3;  // -T: seconds of timed work per size (probe + warmup + iters)
  int minIters = 3, maxIters = 10000, maxWarmup = 10;
  int nranks = 2;  // gloo: ranks to fork
};

inline void usage(const char* prog, bool gloo) {
  std::fprintf(stderr,
               "usage: %s -o allreduce|allgather|reducescatter|broadcast|alltoall%s\n"
               "  [-b min] [-e max] [-f factor] | [-s size,size,...]   (K/M/G suffixes)\n"
               "  [-T seconds per size (0.3)] [-m min iters (3)] [-n max iters (10000)] "
               "[-w max warmup (10)]\n",
               prog, gloo ? " [-a ring|ring_chunked|halving_doubling] [-p nranks]" : "");
}

inline Options parseOptions(int argc, char** argv, bool gloo) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(argv[0], gloo);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      usage(argv[0], gloo);
      std::exit(2);
    }
    std::string v = argv[++i];
    if (a == "-o")
      o.coll = v;
    else if (a == "-a" && gloo)
      o.algo = v;
    else if (a == "-p" && gloo)
      o.nranks = std::atoi(v.c_str());
    else if (a == "-b")
      o.minBytes = parseBytes(v);
    else if (a == "-e")
      o.maxBytes = parseBytes(v);
    else if (a == "-f")
      o.factor = std::max<size_t>(2, std::atoi(v.c_str()));
    else if (a == "-T")
      o.budget = std::atof(v.c_str());
    else if (a == "-m")
      o.minIters = std::max(1, std::atoi(v.c_str()));
    else if (a == "-n")
      o.maxIters = std::max(1, std::atoi(v.c_str()));
    else if (a == "-w")
      o.maxWarmup = std::max(0, std::atoi(v.c_str()));
    else if (a == "-s") {
      size_t pos = 0;
      while (pos <= v.size()) {
        size_t comma = v.find(',', pos);
        if (comma == std::string::npos) comma = v.size();
        if (comma > pos) o.sizes.push_back(parseBytes(v.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else {
      usage(argv[0], gloo);
      std::exit(2);
    }
  }
  if (o.sizes.empty())
    for (size_t s = std::max<size_t>(1, o.minBytes); s <= o.maxBytes; s *= o.factor)
      o.sizes.push_back(s);
  try {
    parseColl(o.coll);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    usage(argv[0], gloo);
    std::exit(2);
  }
  return o;
}

inline double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Each size starts with an untimed call (first touch, connection set-up), then timed batches of
// 1, 2, 4, ... calls until a batch of at least two calls lasts kCalibrateSeconds on the slowest
// rank (or one call a quarter of the budget): its time per call (the probe) picks the iterations
// that fill the budget, within [minIters, maxIters], and a further warmup of about a tenth of that
// (none when only a few iterations fit: the batches warmed up already). Batches, not one probe
// call: a call soon after the ranks have slept (the spell probe) can take milliseconds while the
// virtual CPUs wake, and would plan far too few iterations. `run` makes one call; `slowest` is
// the max over ranks, itself a collective, so that every rank runs the same number of calls.
constexpr double kCalibrateSeconds = 1e-3;
constexpr int kCalibrateMaxBatch = 1 << 16;
template <class Run, class Slowest>
double probeSecondsPerCall(const Options& o, Run&& run, Slowest&& slowest) {
  for (int batch = 1;; batch *= 2) {
    const double t = nowSeconds();
    for (int i = 0; i < batch; i++) run();
    const double took = slowest(nowSeconds() - t);
    if ((batch >= 2 && took >= kCalibrateSeconds) || took >= o.budget / 4 ||
        batch >= kCalibrateMaxBatch)
      return took / batch;
  }
}

struct Plan {
  int warmup, iters;
};
inline Plan planIterations(const Options& o, double probe) {
  probe = std::max(probe, 1e-7);
  double fit = o.budget / probe;
  int iters = int(std::clamp(fit * 0.8, double(o.minIters), double(o.maxIters)));
  int warmup = fit < 8 ? 0 : std::min(iters / 10, o.maxWarmup);
  return {warmup, iters};
}

// The timed loop of one size: calibrate, warm up, then `iters` calls between a barrier and the
// slowest rank's end. A loop that lasted under a quarter of the budget is run again with
// iterations planned from its own time (until it fills that quarter or reaches maxIters): the
// calibration batches can catch a rare stall (a rank descheduled for a time slice where ranks
// outnumber cores) and plan a few dozen calls that then miss every stall, a loop of microseconds
// that says nothing about the calls' real rate.
struct Timed {
  double secondsPerCall;
  int iters;
};
template <class Run, class Barrier, class Slowest>
Timed timeCalls(const Options& o, Run&& run, Barrier&& barrier, Slowest&& slowest) {
  Plan plan = planIterations(o, probeSecondsPerCall(o, run, slowest));
  for (;;) {
    for (int i = 0; i < plan.warmup; i++) run();
    barrier();
    const double t = nowSeconds();
    for (int i = 0; i < plan.iters; i++) run();
    const double loop = slowest(nowSeconds() - t);
    if (loop >= o.budget / 4 || plan.iters >= o.maxIters) return {loop / plan.iters, plan.iters};
    const Plan next = planIterations(o, loop / plan.iters);
    if (next.iters <= plan.iters) return {loop / plan.iters, plan.iters};
    plan = {0, next.iters};  // warm already
  }
}

// The machine's spell, read before the first size and after every size (see line_round_trip.h):
// rank 0 times a cache line's round trip between the first two CPUs while the other ranks sleep,
// so that no rank competes with the probe's threads for a core; every rank then enters the
// library's barrier. Rank 0 gets the round trip in ns, or -1 where it cannot pin two CPUs; the
// other ranks get -1.
// Enough trips for a steady reading, few enough to stay within a spell (perf/README.md, "Spells").
constexpr long kSpellTrips = 4000;
constexpr useconds_t kSpellQuietUs = 20000;  // how long the other ranks stay off the CPUs
constexpr useconds_t kSpellSettleUs = 1000;  // for the others to leave the last call first
inline double spellProbe(int rank) {
  if (rank != 0) {
    usleep(kSpellQuietUs);
    return -1;
  }
  usleep(kSpellSettleUs);
  int a = 0, b = 1;
  if (!probe::firstTwoCpus(a, b)) return -1;
  const probe::RoundTrip rt = probe::lineRoundTrip(a, b, kSpellTrips);
  return rt.pinned ? rt.ns : -1;
}

// The spell readings around one size's measurement.
struct Spell {
  double before = -1, after = -1;
};

// The readings of one sweep: one before the first size, then one after each size, each followed
// by the library's barrier (so that no rank calls again while rank 0 probes).
class SpellTrack {
 public:
  template <class Barrier>
  SpellTrack(int rank, Barrier&& barrier) : rank_(rank), last_(spellProbe(rank)) {
    barrier();
  }
  // After a size: the readings around it (rank 0's; -1 on the others).
  template <class Barrier>
  Spell after(Barrier&& barrier) {
    const Spell s{last_, spellProbe(rank_)};
    last_ = s.after;
    barrier();
    return s;
  }

 private:
  int rank_;
  double last_;
};

// The line compare.py parses. bytes as in the header comment; time = the slowest rank's loop time
// divided by the iterations; GB/s = 1e9 bytes/s; spell: cache-line round trips in ns (-1: none).
inline void printRow(const char* lib, const std::string& algo, Coll c, int n, size_t bytes,
                     double seconds, long wrong, int iters, Spell spell) {
  double us = seconds * 1e6;
  double algbw = double(bytes) / seconds / 1e9;
  std::printf(
      "@row lib=%s algo=%s coll=%s nranks=%d bytes=%zu time_us=%.3f algbw=%.6g busbw=%.6g "
      "wrong=%ld iters=%d spell_ns=%.1f spell_after_ns=%.1f\n",
      lib, algo.empty() ? "default" : algo.c_str(), collName(c), n, bytes, us, algbw,
      algbw * busFactor(c, n), wrong, iters, spell.before, spell.after);
  std::fflush(stdout);
}

}  // namespace cmp

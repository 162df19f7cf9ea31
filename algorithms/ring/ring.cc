#include "algorithms/ring/ring.h"

#include <algorithm>

#include "algorithms/common/builder.h"
#include "src/common/error.h"
#include "src/plan/verifier.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;
using plan::Program;
using plan::Spec;

// Every rank of a ring sends before it receives, so each message must fit its FIFO with a slot to
// spare: ring steps move at most one slot's worth (the data loops over the ring in rounds).
uint64_t ringChunk(const Spec& spec, const Options& options) {
  return std::min(sliceElems(spec, options),
                  std::max<uint64_t>(1, plan::kFifoSlotBytes / spec.elemSize));
}

Plan allReduce(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "ring");
  const int n = spec.nranks;
  const uint64_t align = alignElems(spec), chunk = ringChunk(spec, o);
  const auto parts = splitEven(spec.count, o.channels, align);
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int next = mod(r + 1, n), prev = mod(r - 1, n);
    for (int c = 0; c < o.channels; ++c) {
      if (parts[c] == parts[c + 1]) continue;
      const int lane = addLane(p, c);
      for (uint64_t x = parts[c]; x < parts[c + 1]; x += n * chunk) {
        // One round: n blocks of at most one chunk; block b is reduced along the ring ending at
        // rank b, then circulated from there.
        const auto blk = splitEven(std::min<uint64_t>(n * chunk, parts[c + 1] - x), n, align);
        auto off = [&](int b) { return x + blk[b]; };
        auto len = [&](int b) { return blk[b + 1] - blk[b]; };
        for (int k = 0; k < n; ++k) {
          const int b = mod(r - k - 1, n);
          if (len(b) == 0) continue;  // every rank skips the whole chain of an empty block
          if (k == 0)
            addStep(p, lane, sendStep(next, inRef(off(b)), len(b)));
          else if (k < n - 1)
            addStep(p, lane, recvReduceSendStep(prev, next, inRef(off(b)), len(b)));
          else
            addStep(p, lane,
                    recvReduceCopySendStep(prev, next, inRef(off(b)), outRef(off(b)), len(b)));
        }
        for (int j = 1; j < n; ++j) {
          const int b = mod(r - j, n);
          if (len(b) == 0) continue;
          if (j < n - 1)
            addStep(p, lane, recvCopySendStep(prev, next, outRef(off(b)), len(b)));
          else
            addStep(p, lane, recvStep(prev, outRef(off(b)), len(b)));
        }
      }
    }
  }
  return plan;
}

Plan allGather(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "ring");
  const int n = spec.nranks;
  const uint64_t cnt = spec.count, chunk = ringChunk(spec, o);
  const auto parts = splitEven(cnt, o.channels, alignElems(spec));
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int next = mod(r + 1, n), prev = mod(r - 1, n);
    for (int c = 0; c < o.channels; ++c) {
      if (parts[c] == parts[c + 1]) continue;
      const int lane = addLane(p, c);
      for (uint64_t x = parts[c]; x < parts[c + 1]; x += chunk) {
        const uint64_t len = std::min(chunk, parts[c + 1] - x);
        addStep(p, lane, copyStep(inRef(x), outRef(r * cnt + x), len));
        addStep(p, lane, sendStep(next, inRef(x), len));
        for (int k = 1; k < n; ++k) {
          const uint64_t b = mod(r - k, n);
          if (k < n - 1)
            addStep(p, lane, recvCopySendStep(prev, next, outRef(b * cnt + x), len));
          else
            addStep(p, lane, recvStep(prev, outRef(b * cnt + x), len));
        }
      }
    }
  }
  return plan;
}

Plan reduceScatter(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "ring");
  const int n = spec.nranks;
  const uint64_t cnt = spec.count, chunk = ringChunk(spec, o);
  const auto parts = splitEven(cnt, o.channels, alignElems(spec));
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int next = mod(r + 1, n), prev = mod(r - 1, n);
    for (int c = 0; c < o.channels; ++c) {
      if (parts[c] == parts[c + 1]) continue;
      const int lane = addLane(p, c);
      for (uint64_t x = parts[c]; x < parts[c + 1]; x += chunk) {
        const uint64_t len = std::min(chunk, parts[c + 1] - x);
        for (int k = 0; k < n; ++k) {
          const uint64_t b = mod(r - k - 1, n);
          if (k == 0)
            addStep(p, lane, sendStep(next, inRef(b * cnt + x), len));
          else if (k < n - 1)
            addStep(p, lane, recvReduceSendStep(prev, next, inRef(b * cnt + x), len));
          else
            addStep(p, lane, recvReduceCopyStep(prev, inRef(b * cnt + x), outRef(x), len));
        }
      }
    }
  }
  return plan;
}

// A chain root -> root+1 -> ... -> root-1; each rank forwards slices as they arrive, so one step
// per channel part pipelines by itself and no message needs to fit a FIFO.
Plan broadcast(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "ring");
  const int n = spec.nranks;
  const auto parts = splitEven(spec.count, o.channels, alignElems(spec));
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int next = mod(r + 1, n), prev = mod(r - 1, n), pos = mod(r - spec.root, n);
    if (pos == 0) addStep(p, addLane(p, 0), copyStep(inRef(0), outRef(0), spec.count));
    for (int c = 0; c < o.channels; ++c) {
      const uint64_t x = parts[c], len = parts[c + 1] - parts[c];
      if (len == 0) continue;
      const int lane = addLane(p, c);
      if (pos == 0)
        addStep(p, lane, sendStep(next, inRef(x), len));
      else if (pos < n - 1)
        addStep(p, lane, recvCopySendStep(prev, next, outRef(x), len));
      else
        addStep(p, lane, recvStep(prev, outRef(x), len));
    }
  }
  return plan;
}

// A chain root+1 -> root+2 -> ... -> root reducing on the way. Only the root writes its output
// (NCCL does not require a receive buffer on other ranks).
Plan reduce(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "ring");
  const int n = spec.nranks;
  const auto parts = splitEven(spec.count, o.channels, alignElems(spec));
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int next = mod(r + 1, n), prev = mod(r - 1, n), pos = mod(r - spec.root - 1, n);
    for (int c = 0; c < o.channels; ++c) {
      const uint64_t x = parts[c], len = parts[c + 1] - parts[c];
      if (len == 0) continue;
      const int lane = addLane(p, c);
      if (pos == 0)
        addStep(p, lane, sendStep(next, inRef(x), len));
      else if (pos < n - 1)
        addStep(p, lane, recvReduceSendStep(prev, next, inRef(x), len));
      else
        addStep(p, lane, recvReduceCopyStep(prev, inRef(x), outRef(x), len));
    }
  }
  return plan;
}

}  // namespace

Plan buildRing(const Spec& spec, const Options& options) {
  checkSpec(spec, options);
  Plan plan;
  if (trivialPlan(spec, "ring", &plan)) return plan;
  switch (spec.coll) {
    case Collective::kAllReduce:
      return allReduce(spec, options);
    case Collective::kAllGather:
      return allGather(spec, options);
    case Collective::kReduceScatter:
      return reduceScatter(spec, options);
    case Collective::kBroadcast:
      return broadcast(spec, options);
    case Collective::kReduce:
      return reduce(spec, options);
    default:
      break;
  }
  throw Error(Status::kInvalidArgument,
              std::string("ring does not implement ") + plan::collectiveName(spec.coll));
}

}  // namespace weft::algo

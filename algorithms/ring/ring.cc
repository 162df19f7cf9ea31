#include "algorithms/ring/ring.h"

#include <utility>

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

// A lane of rank `r` and the rank's neighbours in the ring.
struct RingLane {
  Program& p;
  int lane, r, next, prev;
  void add(Step s) { addStep(p, lane, std::move(s)); }
};

// Every rank walks each channel part on a lane of its own, `slice` elements at a time:
// steps(lane, offset, length) adds one slice's steps. start(program, rank) runs first.
template <class Steps, class Start>
Plan ringPlan(const Spec& spec, const Options& o, uint64_t slice, Steps&& steps, Start&& start) {
  const int n = spec.nranks;
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "ring", [&](Program& p, int r) {
    start(p, r);
    forEachPartSlice(p, parts, slice, [&](int lane, uint64_t x, uint64_t len) {
      RingLane l{p, lane, r, mod(r + 1, n), mod(r - 1, n)};
      steps(l, x, len);
    });
  });
}
template <class Steps>
Plan ringPlan(const Spec& spec, const Options& o, uint64_t slice, Steps&& steps) {
  return ringPlan(spec, o, slice, steps, [](Program&, int) {});
}

Plan allReduce(const Spec& spec, const Options& o) {
  const int n = spec.nranks;
  const uint64_t align = alignElems(spec), chunk = ringChunk(spec, o);
  // One round: n blocks of at most one chunk; block b is reduced along the ring ending at rank b,
  // then circulated from there.
  return ringPlan(spec, o, n * chunk, [&](RingLane& l, uint64_t x, uint64_t round) {
    const auto blk = splitEven(round, n, align);
    auto off = [&](int b) { return x + blk[b]; };
    auto len = [&](int b) { return blk[b + 1] - blk[b]; };
    for (int k = 0; k < n; ++k) {
      const int b = mod(l.r - k - 1, n);
      if (len(b) == 0) continue;  // every rank skips the whole chain of an empty block
      if (k == 0)
        l.add(sendStep(l.next, inRef(off(b)), len(b)));
      else if (k < n - 1)
        l.add(recvReduceSendStep(l.prev, l.next, inRef(off(b)), len(b)));
      else
        l.add(recvReduceCopySendStep(l.prev, l.next, inRef(off(b)), outRef(off(b)), len(b)));
    }
    for (int j = 1; j < n; ++j) {
      const int b = mod(l.r - j, n);
      if (len(b) == 0) continue;
      if (j < n - 1)
        l.add(recvCopySendStep(l.prev, l.next, outRef(off(b)), len(b)));
      else
        l.add(recvStep(l.prev, outRef(off(b)), len(b)));
    }
  });
}

Plan allGather(const Spec& spec, const Options& o) {
  const int n = spec.nranks;
  const uint64_t cnt = spec.count;
  return ringPlan(spec, o, ringChunk(spec, o), [&](RingLane& l, uint64_t x, uint64_t len) {
    l.add(copyStep(inRef(x), outRef(l.r * cnt + x), len));
    l.add(sendStep(l.next, inRef(x), len));
    for (int k = 1; k < n; ++k) {
      const Ref block = outRef(mod(l.r - k, n) * cnt + x);
      if (k < n - 1)
        l.add(recvCopySendStep(l.prev, l.next, block, len));
      else
        l.add(recvStep(l.prev, block, len));
    }
  });
}

Plan reduceScatter(const Spec& spec, const Options& o) {
  const int n = spec.nranks;
  const uint64_t cnt = spec.count;
  return ringPlan(spec, o, ringChunk(spec, o), [&](RingLane& l, uint64_t x, uint64_t len) {
    for (int k = 0; k < n; ++k) {
      const Ref block = inRef(mod(l.r - k - 1, n) * cnt + x);
      if (k == 0)
        l.add(sendStep(l.next, block, len));
      else if (k < n - 1)
        l.add(recvReduceSendStep(l.prev, l.next, block, len));
      else
        l.add(recvReduceCopyStep(l.prev, block, outRef(x), len));
    }
  });
}

// A chain root -> root+1 -> ... -> root-1; each rank forwards slices as they arrive, so one step
// per channel part pipelines by itself and no message needs to fit a FIFO.
Plan broadcast(const Spec& spec, const Options& o) {
  const int n = spec.nranks, root = spec.root;
  return ringPlan(
      spec, o, kWholeRange,
      [&](RingLane& l, uint64_t x, uint64_t len) {
        const int pos = mod(l.r - root, n);
        if (pos == 0)
          l.add(sendStep(l.next, inRef(x), len));
        else if (pos < n - 1)
          l.add(recvCopySendStep(l.prev, l.next, outRef(x), len));
        else
          l.add(recvStep(l.prev, outRef(x), len));
      },
      [&](Program& p, int r) {
        if (r == root) addStep(p, addLane(p, 0), copyStep(inRef(0), outRef(0), spec.count));
      });
}

// A chain root+1 -> root+2 -> ... -> root reducing on the way. Only the root writes its output
// (NCCL does not require a receive buffer on other ranks).
Plan reduce(const Spec& spec, const Options& o) {
  const int n = spec.nranks, root = spec.root;
  return ringPlan(spec, o, kWholeRange, [&](RingLane& l, uint64_t x, uint64_t len) {
    const int pos = mod(l.r - root - 1, n);
    if (pos == 0)
      l.add(sendStep(l.next, inRef(x), len));
    else if (pos < n - 1)
      l.add(recvReduceSendStep(l.prev, l.next, inRef(x), len));
    else
      l.add(recvReduceCopyStep(l.prev, inRef(x), outRef(x), len));
  });
}

}  // namespace

Plan buildRing(const Spec& spec, const Options& options) {
  return buildCollective("ring", spec, options,
                         {{Collective::kAllReduce, allReduce},
                          {Collective::kAllGather, allGather},
                          {Collective::kReduceScatter, reduceScatter},
                          {Collective::kBroadcast, broadcast},
                          {Collective::kReduce, reduce}});
}

}  // namespace weft::algo

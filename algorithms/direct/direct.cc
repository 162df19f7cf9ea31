#include "algorithms/direct/direct.h"

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

// Alltoall (exchange = true: block d of the input goes to rank d) or allgather (the whole input
// goes to everyone). Per channel part a send lane and a receive lane, so no rank's sends wait for
// its receives.
Plan pairwise(const Spec& spec, const Options& o, bool exchange) {
  const int n = spec.nranks;
  const uint64_t cnt = spec.count;
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "direct", [&](Program& p, int r) {
    for (const ChannelPart& part : parts) {
      const uint64_t q0 = part.begin, len = part.len();
      const int send = addLane(p, part.channel), recv = addLane(p, part.channel);
      addStep(p, recv, copyStep(inRef((exchange ? r * cnt : 0) + q0), outRef(r * cnt + q0), len));
      for (int k = 1; k < n; ++k) {
        const int to = mod(r + k, n), from = mod(r - k, n);
        addStep(p, send, sendStep(to, inRef((exchange ? to * cnt : 0) + q0), len));
        addStep(p, recv, recvStep(from, outRef(from * cnt + q0), len));
      }
    }
  });
}

Plan alltoall(const Spec& spec, const Options& o) { return pairwise(spec, o, true); }
Plan allGather(const Spec& spec, const Options& o) { return pairwise(spec, o, false); }

// The rooted one-round plans, per channel part [q0, q0 + len) on one lane: a non-root rank
// takes one step with the root (nonRoot); the root copies its own part (own) before or after
// one step with each peer in turn (peer).
template <class NonRoot, class Own, class Peer>
Plan rooted(const Spec& spec, const Options& o, bool ownFirst, NonRoot nonRoot, Own own,
            Peer peer) {
  const int n = spec.nranks, root = spec.root;
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "direct", [&](Program& p, int r) {
    forEachPartSlice(p, parts, kWholeRange, [&](int lane, uint64_t q0, uint64_t len) {
      if (r != root) {
        addStep(p, lane, nonRoot(q0, len));
        return;
      }
      if (ownFirst) addStep(p, lane, own(q0, len));
      for (int k = 1; k < n; ++k) addStep(p, lane, peer(mod(root + k, n), q0, len));
      if (!ownFirst) addStep(p, lane, own(q0, len));
    });
  });
}

Plan gather(const Spec& spec, const Options& o) {
  const int root = spec.root;
  const uint64_t cnt = spec.count;
  return rooted(
      spec, o, true, [&](uint64_t q0, uint64_t len) { return sendStep(root, inRef(q0), len); },
      [&](uint64_t q0, uint64_t len) { return copyStep(inRef(q0), outRef(root * cnt + q0), len); },
      [&](int from, uint64_t q0, uint64_t len) {
        return recvStep(from, outRef(from * cnt + q0), len);
      });
}

Plan scatter(const Spec& spec, const Options& o) {
  const int root = spec.root;
  const uint64_t cnt = spec.count;
  return rooted(
      spec, o, true, [&](uint64_t q0, uint64_t len) { return recvStep(root, outRef(q0), len); },
      [&](uint64_t q0, uint64_t len) { return copyStep(inRef(root * cnt + q0), outRef(q0), len); },
      [&](int to, uint64_t q0, uint64_t len) { return sendStep(to, inRef(to * cnt + q0), len); });
}

// Broadcast in one round: the root sends its input to every peer, then copies it to its output.
Plan broadcast(const Spec& spec, const Options& o) {
  const int root = spec.root;
  return rooted(
      spec, o, false, [&](uint64_t q0, uint64_t len) { return recvStep(root, outRef(q0), len); },
      [&](uint64_t q0, uint64_t len) { return copyStep(inRef(q0), outRef(q0), len); },
      [&](int to, uint64_t q0, uint64_t len) { return sendStep(to, inRef(q0), len); });
}

// Who gets a result in reduceOneRound: everyone (allreduce), each rank its block (reduce-scatter),
// or one root (reduce, any rank >= 0).
constexpr int kEveryRank = -1, kEachItsBlock = -2;

// Reductions in one round, for small messages: every rank sends each peer the input that peer's
// result needs, and the receivers add the contributions in rank order 0..n-1 (so the result does
// not depend on arrival order, and allreduce ranks compute bit-identical sums). Slice by slice
// (all peers per slice), so each FIFO needs room for one slice only. The sum builds up in
// scratch, which keeps in-place calls from overwriting the input being sent.
Plan reduceOneRound(const Spec& spec, const Options& o, int toRoot) {
  const int n = spec.nranks;
  const bool scatter = toRoot == kEachItsBlock;
  const uint64_t cnt = spec.count;
  auto wants = [&](int rank) { return toRoot < 0 || rank == toRoot; };
  auto block = [&](int owner) { return scatter ? static_cast<uint64_t>(owner) * cnt : 0; };
  return eachRank(spec, "direct", [&](Program& p, int r) {
    const bool receives = wants(r), sends = toRoot < 0 || r != toRoot;
    if (receives) p.scratchElems = cnt;
    const int send = sends ? addLane(p, 0) : -1, recv = receives ? addLane(p, 0) : -1;
    forEachSlice(0, cnt, sliceElems(spec, o), [&](uint64_t off, uint64_t len) {
      StepRef lastSend{};
      for (int k = 1; k < n; ++k) {
        const int to = mod(r + k, n);
        if (wants(to)) lastSend = addStep(p, send, sendStep(to, inRef(block(to) + off), len));
      }
      if (!receives) return;
      for (int s = 0; s < n; ++s) {
        if (s == r) {
          Step own = copyStep(inRef(block(r) + off), scratchRef(off), len);
          if (s != 0) own.op = plan::Op::kReduce;
          addStep(p, recv, own);
        } else {
          addStep(
              p, recv,
              s == 0 ? recvStep(s, scratchRef(off), len) : recvReduceStep(s, scratchRef(off), len));
        }
      }
      // An in-place allreduce's output is the input the sends read: write it after them.
      Step done = copyStep(scratchRef(off), outRef(off), len);
      if (toRoot == kEveryRank && sends) done.deps.push_back(lastSend);
      addStep(p, recv, done);
    });
  });
}

Plan allReduce(const Spec& spec, const Options& o) { return reduceOneRound(spec, o, kEveryRank); }
Plan reduceScatter(const Spec& spec, const Options& o) {
  return reduceOneRound(spec, o, kEachItsBlock);
}
Plan reduce(const Spec& spec, const Options& o) { return reduceOneRound(spec, o, spec.root); }

}  // namespace

Plan buildDirect(const Spec& spec, const Options& options) {
  return buildCollective("direct", spec, options,
                         {{Collective::kAlltoAll, alltoall},
                          {Collective::kAllReduce, allReduce},
                          {Collective::kAllGather, allGather},
                          {Collective::kGather, gather},
                          {Collective::kScatter, scatter},
                          {Collective::kReduceScatter, reduceScatter},
                          {Collective::kReduce, reduce},
                          {Collective::kBroadcast, broadcast}});
}

}  // namespace weft::algo

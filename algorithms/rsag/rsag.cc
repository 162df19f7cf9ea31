#include "algorithms/rsag/rsag.h"

#include <algorithm>
#include <vector>

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

// Most slices per block: beyond it slices grow instead (fewer, larger messages).
constexpr uint64_t kMaxSlicesPerBlock = 256;

// Where rank j's block of one channel part lies: `in` in every rank's input, `out` in the
// output (allreduce: the same offset; reduce-scatter: only the owner's, at the part's offset).
struct Block {
  uint64_t in = 0, out = 0, len = 0;
};

struct Layout {
  std::vector<Block> blocks;     // per rank
  std::vector<uint64_t> slices;  // boundaries within a block, shared by all blocks
  uint64_t maxSlice = 0;
  // Slice k of block j: offsets relative to the block start and length.
  uint64_t at(int j, size_t k) const { return std::min(blocks[j].len, slices[k]); }
  uint64_t len(int j, size_t k) const { return at(j, k + 1) - at(j, k); }
};

Layout layout(const Spec& spec, const Options& o, uint64_t q0, uint64_t q1) {
  const int n = spec.nranks;
  const uint64_t align = alignElems(spec);
  Layout l;
  l.blocks.resize(n);
  if (spec.coll == Collective::kAllReduce) {
    const auto b = splitEven(q1 - q0, n, align);
    for (int j = 0; j < n; ++j) l.blocks[j] = {q0 + b[j], q0 + b[j], b[j + 1] - b[j]};
  } else {
    for (int j = 0; j < n; ++j) l.blocks[j] = {j * spec.count + q0, q0, q1 - q0};
  }
  uint64_t most = 0;
  for (const Block& b : l.blocks) most = std::max(most, b.len);
  uint64_t slice = sliceElems(spec, o);
  if (most > slice * kMaxSlicesPerBlock) {
    slice = (most + kMaxSlicesPerBlock - 1) / kMaxSlicesPerBlock;
    slice = (slice + align - 1) / align * align;
  }
  // The same boundaries for every block; the shorter blocks' last slices come out shorter.
  for (uint64_t s = 0; s < most; s += slice) l.slices.push_back(s);
  l.slices.push_back(most);
  l.maxSlice = std::min(slice, most);
  return l;
}

Plan reduceScatterAllGather(const Spec& spec, const Options& o) {
  const bool allReduce = spec.coll == Collective::kAllReduce;
  // Two ranks' allreduce forwards each reduced slice as it is made (reduce-copy-send), on the
  // channel the peer's allgather half receives on: where the peer offers its output as a
  // landing, one pass over both inputs writes both outputs, and no rank rereads a reduced block.
  const bool fused = allReduce && spec.nranks == 2;
  const int n = spec.nranks;
  // Channel parts split every block alike (reduce-scatter: each rank's count).
  const auto parts = channelParts(spec, o);
  std::vector<Layout> layouts;  // per channel part, the same for every rank
  for (const ChannelPart& part : parts) layouts.push_back(layout(spec, o, part.begin, part.end));
  return eachRank(spec, "rsag", [&](Program& p, int r) {
    uint64_t scratch = 0;
    for (size_t part = 0; part < parts.size(); ++part) {
      const int c = parts[part].channel;
      const Layout& l = layouts[part];
      const Block& mine = l.blocks[r];
      const int rsSend = addLane(p, 2 * c), rsRecv = addLane(p, 2 * c);
      if (fused) p.lanes[rsRecv].sendChannel = 2 * c + 1;
      const int agSend = allReduce && !fused ? addLane(p, 2 * c + 1) : -1;
      const int agRecv = allReduce ? addLane(p, 2 * c + 1) : -1;
      const uint64_t sum = scratch;  // this part's running-sum slice
      if (n > 2) scratch += l.maxSlice;
      for (size_t k = 0; k + 1 < l.slices.size(); ++k) {
        // Round i: send to r + i, add what r - i sent (so rounds pair ranks up).
        for (int i = 1; i < n; ++i) {
          const int to = mod(r + i, n);
          if (const uint64_t len = l.len(to, k))
            addStep(p, rsSend, sendStep(to, inRef(l.blocks[to].in + l.at(to, k)), len));
        }
        const uint64_t len = l.len(r, k);
        if (len == 0) continue;
        const Ref own = inRef(mine.in + l.at(r, k)), out = outRef(mine.out + l.at(r, k));
        plan::StepRef done{};
        for (int i = 1; i < n; ++i) {
          const int from = mod(r - i, n);
          const bool first = i == 1, last = i == n - 1;
          Step s = fused           ? recvReduceCopySendStep(from, from, own, out, len)
                   : first && last ? recvReduceCopyStep(from, own, out, len)
                   : first         ? recvReduceCopyStep(from, own, scratchRef(sum), len)
                   : last          ? recvReduceCopyStep(from, scratchRef(sum), out, len)
                                   : recvReduceStep(from, scratchRef(sum), len);
          done = addStep(p, rsRecv, s);
        }
        if (!allReduce || fused) continue;
        for (int i = 1; i < n; ++i) {
          Step s = sendStep(mod(r + i, n), out, len);
          if (i == 1) s.deps.push_back(done);
          addStep(p, agSend, s);
        }
      }
      if (!allReduce) continue;
      for (size_t k = 0; k + 1 < l.slices.size(); ++k) {
        for (int i = 1; i < n; ++i) {
          const int from = mod(r - i, n);
          if (const uint64_t len = l.len(from, k))
            addStep(p, agRecv, recvStep(from, outRef(l.blocks[from].out + l.at(from, k)), len));
        }
      }
    }
    p.scratchElems = scratch;
  });
}

}  // namespace

Plan buildRsag(const Spec& spec, const Options& options) {
  return buildCollective("rsag", spec, options,
                         {{Collective::kAllReduce, reduceScatterAllGather},
                          {Collective::kReduceScatter, reduceScatterAllGather}});
}

}  // namespace weft::algo

#include "synth/solver/instance.h"

#include "src/common/error.h"

namespace weft::synth::solver {

std::string describe(const CollectiveSpec& spec) {
  std::string name = plan::collectiveName(spec.coll);
  if (spec.coll == plan::Collective::kBroadcast) name += "(root=" + std::to_string(spec.root) + ")";
  return name;
}

int mapChunk(const Instance& in, const std::vector<int>& perm, int k) {
  const int c = in.chunks, n = in.nranks;
  switch (in.spec.coll) {
    case plan::Collective::kAllGather:
      return perm[k / c] * c + k % c;
    case plan::Collective::kAlltoAll: {
      const int pair = k / c, s = pair / n, d = pair % n;
      return (perm[s] * n + perm[d]) * c + k % c;
    }
    case plan::Collective::kBroadcast:
      return perm[in.spec.root] == in.spec.root ? k : -1;
    default:
      return -1;
  }
}

Instance makeInstance(const CollectiveSpec& spec, int nranks, int chunks) {
  using plan::Collective;
  if (nranks < 2)
    throw Error(Status::kInvalidArgument,
                "exact synthesis needs at least 2 ranks, got " + std::to_string(nranks));
  if (chunks < 1)
    throw Error(Status::kInvalidArgument,
                "exact synthesis: chunks must be at least 1, got " + std::to_string(chunks));
  Instance in;
  in.spec = spec;
  in.nranks = nranks;
  in.chunks = chunks;
  const uint64_t n = nranks, c = chunks;
  auto others = [&](int except) {
    std::vector<int> out;
    for (int r = 0; r < nranks; ++r)
      if (r != except) out.push_back(r);
    return out;
  };
  switch (spec.coll) {
    case Collective::kAllGather:
      // Chunk k = r*C + j is piece j of rank r's input; it lands at output[k] everywhere.
      in.chunksPerLoop = n * c;
      in.inputChunks = c;
      in.outputChunks = n * c;
      for (int r = 0; r < nranks; ++r)
        for (uint64_t j = 0; j < c; ++j) in.chunkInfo.push_back({r, others(r), j, r * c + j, true});
      break;
    case Collective::kAlltoAll:
      // Piece j of what rank s sends to rank d sits at input[d*C + j] of s and lands at
      // output[s*C + j] of d. The pieces a rank keeps are local copies, not solver chunks.
      in.chunksPerLoop = n * c;
      in.inputChunks = n * c;
      in.outputChunks = n * c;
      for (int s = 0; s < nranks; ++s)
        for (int d = 0; d < nranks; ++d)
          for (uint64_t j = 0; j < c; ++j) {
            ChunkInfo info{s, {}, d * c + j, s * c + j, s == d};
            if (s != d) info.destinations.push_back(d);
            in.chunkInfo.push_back(info);
          }
      break;
    case Collective::kBroadcast:
      if (spec.root < 0 || spec.root >= nranks)
        throw Error(Status::kInvalidArgument, "exact synthesis: broadcast root " +
                                                  std::to_string(spec.root) + " is not a rank");
      in.chunksPerLoop = c;
      in.inputChunks = c;
      in.outputChunks = c;
      for (uint64_t j = 0; j < c; ++j)
        in.chunkInfo.push_back({spec.root, others(spec.root), j, j, true});
      break;
    default:
      throw Error(Status::kInvalidArgument,
                  std::string("exact synthesis supports allgather, alltoall and broadcast, not ") +
                      plan::collectiveName(spec.coll));
  }
  return in;
}

}  // namespace weft::synth::solver

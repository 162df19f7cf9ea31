#include "src/cuda/direct_launch.h"

#include <algorithm>

namespace weft::cuda {

DirectShape directShape(const DirectQuery& q, const Tuning& t) {
  DirectShape s;
  const uint64_t es = dataTypeSize(q.type);
  if (q.count == 0 || es == 0 || q.nranks < 1 || q.slotsPerRank == 0) {
    s.blocks = 0;
    return s;
  }
  const uint64_t n = static_cast<uint64_t>(q.nranks);
  const uint64_t bytes = q.count * es;
  // The bytes one rank's blocks cover: collectives split among the ranks give each 1/n of the
  // elements; alltoall moves a segment per peer.
  uint64_t share = bytes;
  switch (q.coll) {
    case plan::Collective::kAllReduce:
      s.algo = bytes <= t.directOneShotBytes ? DirectAlgo::kOneShot : DirectAlgo::kTwoShot;
      if (s.algo == DirectAlgo::kTwoShot) share = (bytes + n - 1) / n;
      break;
    case plan::Collective::kBroadcast:
    case plan::Collective::kReduce:
      share = (bytes + n - 1) / n;
      break;
    case plan::Collective::kAlltoAll:
      share = bytes * n;
      break;
    default:
      break;
  }
  const uint64_t sms = static_cast<uint64_t>(std::max(1, q.smCount));
  const uint64_t onGpu = static_cast<uint64_t>(std::max(1, q.ranksOnGpu));
  const uint64_t bySms = std::max<uint64_t>(1, sms / onGpu);
  const uint64_t perBlock = std::max<uint64_t>(1, t.directBlockBytes);
  const uint64_t byWork = (share + perBlock - 1) / perBlock;
  const uint64_t blocks = std::clamp<uint64_t>(std::min(bySms, byWork), 1, q.slotsPerRank);
  s.blocks = static_cast<uint32_t>(blocks);
  return s;
}

std::unique_ptr<DirectKernel> DirectKernel::find(const DriverApi& api, CuModule module,
                                                 std::string* why) {
  std::string ignored;
  std::string& reason = why ? *why : ignored;
  if (!api.moduleGetFunction || !api.launchKernel) {
    reason = "the CUDA driver lacks " + missingEntryPoint(&api, DriverFeature::kKernels);
    return nullptr;
  }
  CuFunction function = nullptr;
  const CuResult rc = api.moduleGetFunction(&function, module, kDirectKernelName);
  if (rc != kCuSuccess) {
    reason = std::string("the library's device image has no kernel ") + kDirectKernelName + ": " +
             resultText(&api, rc);
    return nullptr;
  }
  std::unique_ptr<DirectKernel> k(new DirectKernel);
  k->api_ = &api;
  k->function_ = function;
  return k;
}

CuResult DirectKernel::launch(const DirectLaunch& p, CuStream stream, uint32_t threads) const {
  if (threads == 0 || threads > kDirectThreads) return kCuErrorInvalidValue;
  if (p.ranks == 0 || p.blocks == 0) return kCuSuccess;
  if (!directLaunchValid(p)) return kCuErrorInvalidValue;
  // The driver copies the parameter when the launch is queued: `p` need not outlive the call.
  void* params[] = {const_cast<DirectLaunch*>(&p)};
  return api_->launchKernel(static_cast<CuFunction>(function_), p.ranks * p.blocks, 1, 1, threads,
                            1, 1, 0, stream, params, nullptr);
}

}  // namespace weft::cuda

// chunkPlanDifference: the first field in which two ChunkPlans differ, for test messages.
#include <string>

#include "src/plan/msccl_xml.h"

namespace weft::plan {

namespace {

std::string refText(const Ref& r) {
  return std::to_string(r.buffer) + "[" + std::to_string(r.offset) + "]";
}

std::string stepDifference(const Step& a, const Step& b) {
  if (a.op != b.op) return std::string("op ") + opName(a.op) + " vs " + opName(b.op);
  if (a.sendPeer != b.sendPeer)
    return "sendPeer " + std::to_string(a.sendPeer) + " vs " + std::to_string(b.sendPeer);
  if (a.recvPeer != b.recvPeer)
    return "recvPeer " + std::to_string(a.recvPeer) + " vs " + std::to_string(b.recvPeer);
  if (a.src.buffer != b.src.buffer || a.src.offset != b.src.offset)
    return "src " + refText(a.src) + " vs " + refText(b.src);
  if (a.dst.buffer != b.dst.buffer || a.dst.offset != b.dst.offset)
    return "dst " + refText(a.dst) + " vs " + refText(b.dst);
  if (a.count != b.count)
    return "count " + std::to_string(a.count) + " vs " + std::to_string(b.count);
  if (a.deps.size() != b.deps.size())
    return std::to_string(a.deps.size()) + " vs " + std::to_string(b.deps.size()) + " dependencies";
  for (size_t i = 0; i < a.deps.size(); ++i)
    if (a.deps[i].lane != b.deps[i].lane || a.deps[i].step != b.deps[i].step)
      return "dependency " + std::to_string(i) + ": " + std::to_string(a.deps[i].lane) + "." +
             std::to_string(a.deps[i].step) + " vs " + std::to_string(b.deps[i].lane) + "." +
             std::to_string(b.deps[i].step);
  return "";
}

}  // namespace

std::string chunkPlanDifference(const ChunkPlan& a, const ChunkPlan& b) {
  auto num = [](const char* what, auto x, auto y) -> std::string {
    if (x == y) return "";
    return std::string(what) + " " + std::to_string(x) + " vs " + std::to_string(y);
  };
  if (a.name != b.name) return "name '" + a.name + "' vs '" + b.name + "'";
  if (a.proto != b.proto) return "proto " + a.proto + " vs " + b.proto;
  if (a.coll != b.coll)
    return std::string("collective ") + collectiveName(a.coll) + " vs " + collectiveName(b.coll);
  for (std::string d :
       {num("nranks", a.nranks, b.nranks), num("root", a.root, b.root),
        num("chunksPerLoop", a.chunksPerLoop, b.chunksPerLoop),
        num("inPlace", a.inPlace, b.inPlace), num("outOfPlace", a.outOfPlace, b.outOfPlace),
        num("minBytes", a.minBytes, b.minBytes), num("maxBytes", a.maxBytes, b.maxBytes),
        num("programs", a.programs.size(), b.programs.size())})
    if (!d.empty()) return d;
  for (size_t r = 0; r < a.programs.size(); ++r) {
    const ChunkProgram &pa = a.programs[r], &pb = b.programs[r];
    const std::string at = "rank " + std::to_string(r) + ": ";
    for (std::string d : {num("inputChunks", pa.inputChunks, pb.inputChunks),
                          num("outputChunks", pa.outputChunks, pb.outputChunks),
                          num("scratchChunks", pa.scratchChunks, pb.scratchChunks),
                          num("lanes", pa.lanes.size(), pb.lanes.size())})
      if (!d.empty()) return at + d;
    for (size_t l = 0; l < pa.lanes.size(); ++l) {
      const Lane &la = pa.lanes[l], &lb = pb.lanes[l];
      const std::string lat = at + "lane " + std::to_string(l) + ": ";
      if (la.channel != lb.channel) return lat + num("channel", la.channel, lb.channel);
      if (sendChannelOf(la) != sendChannelOf(lb))
        return lat + num("send channel", sendChannelOf(la), sendChannelOf(lb));
      if (la.steps.size() != lb.steps.size())
        return lat + num("steps", la.steps.size(), lb.steps.size());
      for (size_t s = 0; s < la.steps.size(); ++s) {
        std::string d = stepDifference(la.steps[s], lb.steps[s]);
        if (!d.empty()) return lat + "step " + std::to_string(s) + ": " + d;
      }
    }
  }
  return "";
}

}  // namespace weft::plan

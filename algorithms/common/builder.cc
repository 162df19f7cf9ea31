#include "algorithms/common/builder.h"

#include <algorithm>
#include <string>

#include "src/common/error.h"
#include "src/plan/verifier.h"

namespace weft::algo {

using plan::Op;

uint64_t alignElems(const plan::Spec& spec) {
  return std::max<uint64_t>(1, 64 / std::max<uint32_t>(1, spec.elemSize));
}

uint64_t sliceElems(const plan::Spec& spec, const Options& options) {
  uint64_t s = options.sliceElems ? options.sliceElems
                                  : plan::kFifoSlotBytes / std::max<uint32_t>(1, spec.elemSize);
  const uint64_t a = alignElems(spec);
  if (s >= a) s -= s % a;
  return std::max<uint64_t>(1, s);
}

uint64_t ringChunk(const plan::Spec& spec, const Options& options) {
  return std::min(sliceElems(spec, options),
                  std::max<uint64_t>(1, plan::kFifoSlotBytes / spec.elemSize));
}

std::vector<uint64_t> splitEven(uint64_t count, int parts, uint64_t align) {
  std::vector<uint64_t> off(parts + 1, 0);
  const uint64_t p = parts;
  if (align > 1 && count >= align * p) {
    const uint64_t units = count / align, base = units / p, extra = units % p;
    for (uint64_t i = 0; i < p; ++i) off[i + 1] = off[i] + (base + (i < extra)) * align;
    off[p] = count;  // the sub-alignment tail joins the last piece
  } else {
    const uint64_t base = count / p, extra = count % p;
    for (uint64_t i = 0; i < p; ++i) off[i + 1] = off[i] + base + (i < extra);
  }
  return off;
}

std::vector<ChannelPart> channelParts(const plan::Spec& spec, const Options& options) {
  const auto off = splitEven(spec.count, options.channels, alignElems(spec));
  std::vector<ChannelPart> parts;
  for (int c = 0; c < options.channels; ++c)
    if (off[c] != off[c + 1]) parts.push_back({c, off[c], off[c + 1]});
  return parts;
}

namespace {
Step make(Op op, int from, int to, Ref src, Ref dst, uint64_t n) {
  Step s;
  s.op = op;
  s.recvPeer = from;
  s.sendPeer = to;
  s.src = src;
  s.dst = dst;
  s.count = n;
  return s;
}
}  // namespace

Step sendStep(int to, Ref src, uint64_t n) { return make(Op::kSend, -1, to, src, {}, n); }
Step recvStep(int from, Ref dst, uint64_t n) { return make(Op::kRecv, from, -1, {}, dst, n); }
Step recvReduceStep(int from, Ref dst, uint64_t n) {
  return make(Op::kRecvReduce, from, -1, {}, dst, n);
}
Step recvCopySendStep(int from, int to, Ref dst, uint64_t n) {
  return make(Op::kRecvCopySend, from, to, {}, dst, n);
}
Step recvReduceSendStep(int from, int to, Ref src, uint64_t n) {
  return make(Op::kRecvReduceSend, from, to, src, {}, n);
}
Step recvReduceCopyStep(int from, Ref src, Ref dst, uint64_t n) {
  return make(Op::kRecvReduceCopy, from, -1, src, dst, n);
}
Step recvReduceCopySendStep(int from, int to, Ref src, Ref dst, uint64_t n) {
  return make(Op::kRecvReduceCopySend, from, to, src, dst, n);
}
Step copyStep(Ref src, Ref dst, uint64_t n) { return make(Op::kCopy, -1, -1, src, dst, n); }
Step reduceStep(Ref src, Ref dst, uint64_t n) { return make(Op::kReduce, -1, -1, src, dst, n); }

int addLane(std::vector<plan::Lane>& lanes, int channel) {
  lanes.emplace_back();
  lanes.back().channel = channel;
  return static_cast<int>(lanes.size()) - 1;
}

plan::StepRef addStep(std::vector<plan::Lane>& lanes, int lane, Step s) {
  auto& steps = lanes[lane].steps;
  steps.push_back(std::move(s));
  return {lane, static_cast<int32_t>(steps.size()) - 1};
}

void checkSpec(const plan::Spec& spec, const Options& options) {
  auto bad = [](const std::string& m) { throw Error(Status::kInvalidArgument, m); };
  if (spec.nranks < 1) bad("nranks must be at least 1, got " + std::to_string(spec.nranks));
  const bool rooted =
      spec.coll == plan::Collective::kBroadcast || spec.coll == plan::Collective::kReduce ||
      spec.coll == plan::Collective::kGather || spec.coll == plan::Collective::kScatter;
  if (rooted && (spec.root < 0 || spec.root >= spec.nranks))
    bad("root " + std::to_string(spec.root) + " is not a rank of " + std::to_string(spec.nranks));
  if (spec.elemSize == 0) bad("elemSize must be positive");
  if (options.channels < 1 || options.channels > 64)
    bad("channels must be in [1, 64], got " + std::to_string(options.channels));
  if (spec.coll == plan::Collective::kSendRecv)
    bad("sendrecv groups are built with p2pProgram(), not by a collective algorithm");
}

plan::Plan emptyPlan(const plan::Spec& spec, const char* algorithm) {
  plan::Plan p;
  p.algorithm = algorithm;
  p.spec = spec;
  p.inPlaceSafe = spec.coll != plan::Collective::kAlltoAll;
  p.programs.resize(spec.nranks);
  return p;
}

bool trivialPlan(const plan::Spec& spec, const char* algorithm, plan::Plan* plan) {
  if (spec.count != 0 && spec.nranks != 1) return false;
  *plan = emptyPlan(spec, algorithm);
  if (spec.count != 0) {
    plan::Program& p = plan->programs[0];
    addStep(p, addLane(p, 0), copyStep(inRef(0), outRef(0), spec.count));
  }
  return true;
}

plan::Plan buildCollective(const char* algorithm, const plan::Spec& spec, const Options& options,
                           std::initializer_list<CollectiveBuilder> builders) {
  checkSpec(spec, options);
  plan::Plan plan;
  if (trivialPlan(spec, algorithm, &plan)) return plan;
  for (const CollectiveBuilder& b : builders)
    if (b.coll == spec.coll) return b.build(spec, options);
  throw Error(Status::kInvalidArgument,
              std::string(algorithm) + " does not implement " + plan::collectiveName(spec.coll));
}

}  // namespace weft::algo

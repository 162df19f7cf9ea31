// The plans and Works of a communicator's calls: which plan a call runs (the selector's choice,
// built once and cached by spec), the tags that tell one call's messages from another's, and
// the exec::Work a call hands the executor (collectives, and a group's point-to-point calls).
// A collective call's Work is built in one place (fillCallWork) whichever path runs it, with
// its operator lowered there by exec::lowerOperator: the host executor and the device
// interpreter (which encodes that Work, src/cuda/device_plan.h) run the same lowered program.
#include <algorithm>
#include <cstring>

#include "src/common/log.h"
#include "src/common/reduce.h"
#include "src/core/communicator.h"
#include "src/core/plan_maker.h"
#include "src/exec/lower.h"
#include "src/plan/chunk_plan.h"
#include "src/select/selector.h"

namespace weft::core {
namespace {

// Whether a call is in place as NCCL defines it: the same buffer, or for allgather /
// reducescatter the rank's slot of the larger buffer.
bool inPlaceCall(const Call& c, int rank, size_t elemSize) {
  const char* in = static_cast<const char*>(c.send);
  const char* out = static_cast<const char*>(c.recv);
  const size_t slot = static_cast<size_t>(rank) * c.count * elemSize;
  if (c.coll == plan::Collective::kAllGather) return in == out + slot;
  if (c.coll == plan::Collective::kReduceScatter) return out == in + slot;
  return in == out;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// What a call computes, as a plan's spec.
plan::Spec specOf(const Call& call, int nranks) {
  plan::Spec spec;
  spec.coll = call.coll;
  spec.nranks = nranks;
  spec.root = call.root;
  spec.count = call.count;
  spec.elemSize = static_cast<uint32_t>(dataTypeSize(call.type));
  return spec;
}

}  // namespace

const plan::Plan& Communicator::planFor(const plan::Spec& spec, const select::Choice& choice,
                                        std::shared_ptr<const plan::Plan>* holder) {
  std::string key = choice.algorithm + "/" + std::to_string(static_cast<int>(spec.coll)) + "/" +
                    std::to_string(spec.count) + "/" + std::to_string(spec.root) + "/" +
                    std::to_string(spec.elemSize) + "/" + std::to_string(choice.options.channels);
  std::lock_guard<std::mutex> lock(planMu_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() > 512) plans_.clear();  // bounded: counts vary in sweeps
    // Library plans that need buffering run in pieces whose messages fit a slot.
    auto p = choice.chunkPlan ? std::make_shared<const plan::Plan>(select::instantiateLibraryPlan(
                                    *choice.chunkPlan, spec.count, spec.elemSize, choice.algorithm,
                                    choice.pieces ? ctx_.slotBytes : 0))
                              : std::make_shared<const plan::Plan>(
                                    algo::build(choice.algorithm, spec, choice.options));
    it = plans_.emplace(key, std::move(p)).first;
  }
  *holder = it->second;
  return *it->second;
}

uint32_t Communicator::collectiveTag(uint64_t seq, const Call& c) {
  uint64_t h = mix(0x636f6c6cull, seq);
  h = mix(h, static_cast<uint64_t>(c.coll));
  h = mix(h, c.count);
  h = mix(h, static_cast<uint64_t>(c.type));
  h = mix(h, static_cast<uint64_t>(c.op >= kNumBuiltinOps ? kNumBuiltinOps : c.op));
  h = mix(h, static_cast<uint64_t>(c.root));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

std::shared_ptr<const plan::Plan> Communicator::planForCall(const Call& call, bool* inPlaceOut) {
  const plan::Spec spec = specOf(call, nranks_);
  const bool inPlace = inPlaceCall(call, rank_, spec.elemSize);
  *inPlaceOut = inPlace;
  const bool scalesInput =
      call.op >= kNumBuiltinOps || exec::lowersToPreMulSum(static_cast<RedOp>(call.op), call.type);
  const CallShape shape{spec.count, spec.root, spec.elemSize, spec.coll, inPlace, scalesInput};
  if (lastPlan_ && shape == lastShape_) return lastPlan_;
  {
    std::lock_guard<std::mutex> lock(planMu_);
    auto hit = shapePlans_.find(shape);
    if (hit != shapePlans_.end()) {
      lastShape_ = shape;
      lastPlan_ = hit->second;
      return hit->second;
    }
  }
  std::shared_ptr<const plan::Plan> plan;
  select::Choice choice =
      planMaker_->selector().choose(spec, select::CallTraits{inPlace, scalesInput});
  // A ring message must fit one FIFO slot, so plans slice by this communicator's slot size.
  choice.options.sliceElems = ctx_.slotBytes / spec.elemSize;
  planFor(spec, choice, &plan);
  if (choice.chunkPlan)
    WEFT_INFO(TUNING, "rank %d: %s of %lu x %u bytes%s uses %s from %s%s", rank_,
              plan::collectiveName(spec.coll), static_cast<unsigned long>(spec.count),
              spec.elemSize, inPlace ? " in place" : "", choice.algorithm.c_str(),
              choice.chunkPlanSource.c_str(),
              plan->pieces > 1 ? (" in " + std::to_string(plan->pieces) + " pieces").c_str() : "");
  std::lock_guard<std::mutex> lock(planMu_);
  if (shapePlans_.size() > 512) shapePlans_.clear();  // bounded: counts vary in sweeps
  shapePlans_.emplace(shape, plan);
  lastShape_ = shape;
  lastPlan_ = plan;
  return plan;
}

exec::Work Communicator::collectiveWork(const Call& call) {
  exec::Work w;
  fillCollectiveWork(call, &w);
  return w;
}

void Communicator::fillCallWork(const Call& call, exec::Work& w) {
  bool inPlace = false;
  w.plan = planForCall(call, &inPlace);
  const plan::Plan& p = *w.plan;
  if (!p.outOfPlaceSafe && !inPlace)
    fail(Status::kInternalError, "plan " + p.algorithm + " only runs in place");
  w.program = &p.programs[rank_];
  w.rank = rank_;
  w.type = call.type;
  w.tuning = &tuning_;
  w.buffers.assign({const_cast<char*>(static_cast<const char*>(call.send)),
                    static_cast<char*>(call.recv), nullptr});
  // The operator, lowered once for whichever path runs the call: an op handle is PreMulSum by
  // its factor.
  const bool handle = call.op >= kNumBuiltinOps;
  exec::lowerOperator(&w, handle ? RedOp::kPreMulSum : static_cast<RedOp>(call.op),
                      handle ? ops_[call.op - kNumBuiltinOps].scalar : Scalar{});
}

exec::Work Communicator::workForDevice(const Call& call) {
  exec::Work w;
  fillCallWork(call, w);
  return w;
}

void Communicator::fillCollectiveWork(const Call& call, exec::Work* out) {
  // Every field is set, so a Work reused from an earlier call keeps only its vectors' capacity.
  exec::Work& w = *out;
  w.stamp = exec::nextWorkStamp();
  w.finish = nullptr;
  w.keep.reset();
  w.byReference = true;
  fillCallWork(call, w);
  const plan::Plan& p = *w.plan;
  const plan::Spec spec = specOf(call, nranks_);
  w.conns = this;
  w.abort = &aborted_;
  const size_t es = spec.elemSize;
  if (w.program->scratchElems > 0) {
    const size_t bytes = w.program->scratchElems * es;
    if (bytes <= kInlineScratchBytes) {
      // Small: the Work's own buffer, which a reused Work keeps from call to call.
      if (w.inlineScratch.size() < bytes) w.inlineScratch.resize(bytes);
      w.buffers[plan::kScratch] = w.inlineScratch.data();
    } else {
      std::shared_ptr<char> scratch = scratch_->take(bytes);
      w.buffers[plan::kScratch] = scratch.get();
      w.keep = std::move(scratch);
    }
  }
  // A library plan's name is part of the tag: ranks that chose different plans (plan directories
  // that differ between processes, say) fail with a mismatch instead of mixing their messages.
  uint32_t planTag = 0;
  if (p.algorithm.compare(0, 6, "msccl:") == 0 || p.algorithm.compare(0, 6, "synth:") == 0) {
    planTag = 2166136261u;
    for (char c : p.algorithm) planTag = (planTag ^ static_cast<uint8_t>(c)) * 16777619u;
  }
  w.planTag = planTag;
  w.laneTags.assign(w.program->lanes.size(), nextCollectiveTag(call) ^ planTag);
  // An in-place call of a plan not built for it (alltoall) has no ordering between what it sends
  // and what it overwrites: sending by reference there could wait on itself (see Work).
  if (!p.inPlaceSafe) {
    const plan::BufferSizes sz = plan::bufferSizes(spec, rank_);
    const char* in = static_cast<const char*>(call.send);
    const char* out = static_cast<const char*>(call.recv);
    if (in && out && in < out + sz.output * es && out < in + sz.input * es) w.byReference = false;
  }
}

bool Communicator::refillCollectiveWork(const Call& call, exec::Work* w) {
  if (call.op >= kNumBuiltinOps || w->keep || !w->program) return false;
  std::fill(w->laneTags.begin(), w->laneTags.end(), nextCollectiveTag(call) ^ w->planTag);
  return true;
}

exec::Work Communicator::p2pWork(const std::vector<Call>& calls) {
  std::vector<algo::P2pOp> ops;
  exec::Work w;
  w.buffers = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    algo::P2pOp op;
    op.send = c.isSend;
    op.peer = c.root;
    op.count = c.count * dataTypeSize(c.type);  // bytes: ops of one group may differ in type
    op.bufferIndex = static_cast<uint16_t>(i);
    ops.push_back(op);
    w.buffers.push_back(c.isSend ? const_cast<char*>(static_cast<const char*>(c.send))
                                 : static_cast<char*>(c.recv));
  }
  // Any send buffer overlapping any receive buffer rules out sending by reference (see Work).
  for (const Call& a : calls)
    for (const Call& b : calls) {
      if (!a.isSend || b.isSend) continue;
      const char* s0 = static_cast<const char*>(a.send);
      const char* r0 = static_cast<const char*>(b.recv);
      if (s0 < r0 + b.count * dataTypeSize(b.type) && r0 < s0 + a.count * dataTypeSize(a.type))
        w.byReference = false;
    }
  auto owned = std::make_shared<plan::Plan>();
  owned->algorithm = "p2p";
  owned->spec.coll = plan::Collective::kSendRecv;
  owned->spec.nranks = nranks_;
  owned->programs.push_back(algo::p2pProgram(rank_, nranks_, ops));
  w.program = &owned->programs[0];
  w.plan = owned;
  w.rank = rank_;
  w.type = DataType::kUint8;
  w.op = RedOp::kSum;
  w.conns = this;
  w.abort = &aborted_;
  w.tuning = &tuning_;
  // One tag per (sender, receiver, group sequence) so both sides of a lane agree.
  std::vector<bool> sendBumped(nranks_, false), recvBumped(nranks_, false);
  for (const auto& lane : w.program->lanes) {
    for (const auto& st : lane.steps) {
      if (plan::opSends(st.op) && !sendBumped[st.sendPeer]) {
        sendBumped[st.sendPeer] = true;
        ++sendSeq_[st.sendPeer];
      }
      if (plan::opRecvs(st.op) && !recvBumped[st.recvPeer]) {
        recvBumped[st.recvPeer] = true;
        ++recvSeq_[st.recvPeer];
      }
    }
  }
  for (const auto& lane : w.program->lanes) {
    uint32_t tag = 0;
    if (!lane.steps.empty()) {
      const auto& st = lane.steps.front();
      uint64_t h = 0x70327032ull;
      if (plan::opSends(st.op))
        h = mix(mix(mix(h, rank_), st.sendPeer), sendSeq_[st.sendPeer]);
      else if (plan::opRecvs(st.op))
        h = mix(mix(mix(h, st.recvPeer), rank_), recvSeq_[st.recvPeer]);
      tag = static_cast<uint32_t>(h ^ (h >> 32));
    }
    w.laneTags.push_back(tag);
  }
  return w;
}

}  // namespace weft::core

#include "src/cuda/device_plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "src/common/error.h"
#include "src/exec/lower.h"
#include "src/plan/plan.h"

namespace weft::cuda {
namespace {

[[noreturn]] void refuse(int rank, const std::string& what) {
  throw Error(Status::kInvalidArgument,
              "device plan for rank " + std::to_string(rank) + ": " + what);
}

uint64_t alignUp(uint64_t v) { return (v + 15) / 16 * 16; }

// Assigns each distinct (peer, channel) of one direction an index, remembering which lane owns
// it: a FIFO end belongs to one thread block.
class LinkTable {
 public:
  int16_t indexOf(int rank, int peer, int channel, uint32_t lane, const char* direction) {
    const auto key = std::make_pair(peer, channel);
    auto it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(key, static_cast<int16_t>(links_.size())).first;
      links_.push_back({peer, channel});
      owner_.push_back(lane);
      if (links_.size() > 32767) refuse(rank, "too many links");
    } else if (owner_[static_cast<size_t>(it->second)] != lane) {
      refuse(rank, std::string("lanes ") + std::to_string(owner_[it->second]) + " and " +
                       std::to_string(lane) + " both " + direction + " peer " +
                       std::to_string(peer) + " on channel " + std::to_string(channel));
    }
    return it->second;
  }
  const std::vector<DeviceLink>& links() const { return links_; }

 private:
  std::map<std::pair<int, int>, int16_t> index_;
  std::vector<DeviceLink> links_;
  std::vector<uint32_t> owner_;
};

// Buffer ids past what a run's arguments carry, or past the Work's buffers, are refused before
// anything indexes with them.
void checkBuffers(const exec::Work& w) {
  const auto& lanes = w.program->lanes;
  const size_t most = std::min<size_t>(kMaxDeviceBuffers, w.buffers.size());
  for (size_t l = 0; l < lanes.size(); ++l)
    for (size_t i = 0; i < lanes[l].steps.size(); ++i) {
      const plan::Step& s = lanes[l].steps[i];
      if (s.src.buffer >= most || s.dst.buffer >= most)
        refuse(w.rank, "lane " + std::to_string(l) + " step " + std::to_string(i) +
                           " names a buffer past the device interpreter's " + std::to_string(most));
    }
}

}  // namespace

DevicePlanBlob encodeForDevice(const exec::Work& w, uint32_t slotBytes) {
  if (!w.program || !w.plan) refuse(w.rank, "a Work without a program");
  checkBuffers(w);
  exec::Lowered lowered;
  exec::lower(w, &lowered);
  return encodeForDevice(w, lowered, slotBytes);
}

DevicePlanBlob lowerForDevice(const plan::Program& program, const plan::Spec& spec, int rank,
                              const DeviceCall& call) {
  auto holder = std::make_shared<plan::Plan>();
  holder->spec = spec;
  exec::Work w;
  w.plan = holder;
  w.program = &program;
  w.rank = rank;
  w.type = call.type;
  w.buffers.assign(kMaxDeviceBuffers, nullptr);
  exec::lowerOperator(&w, call.op, call.scalar);
  return encodeForDevice(w, call.slotBytes);
}

DevicePlanBlob encodeForDevice(const exec::Work& w, const exec::Lowered& lowered,
                               uint32_t slotBytes) {
  const int rank = w.rank;
  if (!w.program) refuse(rank, "a Work without a program");
  const plan::Program& program = *w.program;
  const size_t es = isValid(w.type) ? dataTypeSize(w.type) : 0;
  if (es == 0) refuse(rank, "invalid data type");
  if (slotBytes < es) refuse(rank, "FIFO slots smaller than one element");
  if (static_cast<int>(w.op) < 0 || static_cast<int>(w.op) > static_cast<int>(RedOp::kPreMulSum))
    refuse(rank, "invalid reduction operator");
  if (w.op == RedOp::kAvg)
    refuse(rank, "operator Avg not lowered (exec::lowerOperator makes it PreMulSum or Sum)");
  const auto& lanes = program.lanes;
  size_t total = 0;
  for (const plan::Lane& lane : lanes) total += lane.steps.size();
  if (lowered.laneFirst.size() != lanes.size() || lowered.steps.size() != total)
    refuse(rank, "the lowering given is of another program");

  DevicePlan head;
  head.rank = rank;
  head.type = static_cast<int32_t>(w.type);
  head.elemSize = static_cast<uint32_t>(es);
  head.sliceElems = slotBytes / es;
  head.op = static_cast<int32_t>(w.op);
  if (w.op == RedOp::kPreMulSum) head.scalar = w.scalar;
  head.divisor = w.divisor;
  head.divideCount = w.divisor > 1 ? w.divideCount : 0;

  std::vector<uint32_t> first;
  std::vector<DeviceStep> steps;
  std::vector<DeviceDep> deps;
  LinkTable sends, recvs;
  for (uint32_t l = 0; l < lanes.size(); ++l) {
    if (lowered.laneFirst[l] != steps.size())
      refuse(rank, "the lowering given is of another program");
    first.push_back(static_cast<uint32_t>(steps.size()));
    const plan::Lane& lane = lanes[l];
    for (uint32_t i = 0; i < lane.steps.size(); ++i) {
      const plan::Step& s = lane.steps[i];
      DeviceStep d;
      d.op = static_cast<uint8_t>(s.op);
      if (s.src.buffer >= kMaxDeviceBuffers || s.dst.buffer >= kMaxDeviceBuffers)
        refuse(rank, "lane " + std::to_string(l) + " step " + std::to_string(i) +
                         " names a buffer past the device interpreter's " +
                         std::to_string(kMaxDeviceBuffers));
      // The host lowering's decision for this step, not one of the encoding's own.
      const exec::LoweredStep& low = lowered.steps[lowered.laneFirst[l] + i];
      d.srcBuffer = static_cast<uint8_t>(s.src.buffer);
      d.dstBuffer = static_cast<uint8_t>(s.dst.buffer);
      d.srcOffset = s.src.offset;
      d.dstOffset = s.dst.offset;
      d.count = s.count;
      d.scaled = low.scaled ? 1 : 0;
      if (plan::opSends(s.op))
        d.sendLink = sends.indexOf(rank, s.sendPeer, plan::sendChannelOf(lane), l, "send to");
      if (plan::opRecvs(s.op))
        d.recvLink = recvs.indexOf(rank, s.recvPeer, lane.channel, l, "receive from");
      d.depFirst = static_cast<uint32_t>(deps.size());
      for (const plan::StepRef& r : s.deps) {
        const bool valid =
            r.lane >= 0 && static_cast<size_t>(r.lane) < lanes.size() && r.step >= 0 &&
            static_cast<size_t>(r.step) < lanes[r.lane].steps.size() &&
            !(static_cast<uint32_t>(r.lane) == l && static_cast<uint32_t>(r.step) >= i);
        if (!valid)
          refuse(rank, "lane " + std::to_string(l) + " step " + std::to_string(i) +
                           " depends on a step that does not exist or comes after it");
        deps.push_back({static_cast<uint32_t>(r.lane), static_cast<uint32_t>(r.step)});
      }
      d.depCount = static_cast<uint32_t>(deps.size()) - d.depFirst;
      steps.push_back(d);
    }
  }
  first.push_back(static_cast<uint32_t>(steps.size()));

  head.lanes = static_cast<uint32_t>(lanes.size());
  head.steps = static_cast<uint32_t>(steps.size());
  head.deps = static_cast<uint32_t>(deps.size());
  head.sendLinks = static_cast<uint32_t>(sends.links().size());
  head.recvLinks = static_cast<uint32_t>(recvs.links().size());
  uint64_t at = alignUp(sizeof(DevicePlan));
  head.laneFirstAt = at;
  at = alignUp(at + first.size() * sizeof(uint32_t));
  head.stepsAt = at;
  at = alignUp(at + steps.size() * sizeof(DeviceStep));
  head.depsAt = at;
  at = alignUp(at + deps.size() * sizeof(DeviceDep));
  head.sendLinksAt = at;
  at = alignUp(at + sends.links().size() * sizeof(DeviceLink));
  head.recvLinksAt = at;
  at = alignUp(at + recvs.links().size() * sizeof(DeviceLink));
  head.bytes = at;

  DevicePlanBlob blob;
  blob.storage_.assign(at / 16, {});
  auto* base = reinterpret_cast<unsigned char*>(blob.storage_.data());
  auto put = [&](uint64_t offset, const void* src, size_t bytes) {
    if (bytes) std::memcpy(base + offset, src, bytes);
  };
  put(0, &head, sizeof head);
  put(head.laneFirstAt, first.data(), first.size() * sizeof(uint32_t));
  put(head.stepsAt, steps.data(), steps.size() * sizeof(DeviceStep));
  put(head.depsAt, deps.data(), deps.size() * sizeof(DeviceDep));
  put(head.sendLinksAt, sends.links().data(), sends.links().size() * sizeof(DeviceLink));
  put(head.recvLinksAt, recvs.links().data(), recvs.links().size() * sizeof(DeviceLink));
  return blob;
}

}  // namespace weft::cuda

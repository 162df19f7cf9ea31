#include "src/cuda/device_plan.h"

#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "src/common/error.h"
#include "src/common/reduce.h"
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

}  // namespace

DevicePlanBlob lowerForDevice(const plan::Program& program, const plan::Spec& spec, int rank,
                              const DeviceCall& call) {
  const size_t es = dataTypeSize(call.type);
  if (es == 0) refuse(rank, "invalid data type");
  if (call.slotBytes < es) refuse(rank, "FIFO slots smaller than one element");
  if (static_cast<int>(call.op) < 0 ||
      static_cast<int>(call.op) > static_cast<int>(RedOp::kPreMulSum))
    refuse(rank, "invalid reduction operator");

  DevicePlan head;
  head.rank = rank;
  head.type = static_cast<int32_t>(call.type);
  head.elemSize = static_cast<uint32_t>(es);
  head.sliceElems = call.slotBytes / es;
  RedOp op = call.op;
  if (op == RedOp::kAvg) {
    if (isFloating(call.type)) {
      op = RedOp::kPreMulSum;
      head.scalar = reciprocalScalar(call.type, spec.nranks);
    } else {
      op = RedOp::kSum;
      const bool hasResult = spec.coll != plan::Collective::kReduce || spec.root == rank;
      if (hasResult && spec.nranks > 1) {
        head.divisor = static_cast<uint64_t>(spec.nranks);
        head.divideCount = spec.count;
      }
    }
  } else if (op == RedOp::kPreMulSum) {
    head.scalar = call.scalar;
  }
  head.op = static_cast<int32_t>(op);

  std::vector<uint32_t> first;
  std::vector<DeviceStep> steps;
  std::vector<DeviceDep> deps;
  LinkTable sends, recvs;
  const auto& lanes = program.lanes;
  for (uint32_t l = 0; l < lanes.size(); ++l) {
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
      d.srcBuffer = static_cast<uint8_t>(s.src.buffer);
      d.dstBuffer = static_cast<uint8_t>(s.dst.buffer);
      d.srcOffset = s.src.offset;
      d.dstOffset = s.dst.offset;
      d.count = s.count;
      d.scaled = op == RedOp::kPreMulSum && s.src.buffer == plan::kInput && plan::opReadsSrc(s.op);
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

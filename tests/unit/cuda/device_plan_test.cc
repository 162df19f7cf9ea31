// The device encoding of a rank's Work (src/cuda/device_plan.h) against the host lowering it
// encodes: for the library's plans of every algorithm and collective and for imported MSCCL XML,
// the blob's header carries the Work's lowered operator (exec::lowerOperator) and each step the
// host lowering's decisions (exec::lower), step by step; the operator's one lowering (Avg on
// integers and floats, PreMulSum, a reduce's non-root); what the encoding refuses; and that the
// blob is relocatable.
#include "src/cuda/device_plan.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "src/common/reduce.h"
#include "src/exec/lower.h"
#include "src/plan/chunk_plan.h"
#include "src/plan/msccl_xml.h"

namespace weft::cuda {
namespace {

using plan::Collective;

// Rank r's Work of `p` for a call of `type` and `op`, its operator lowered the one way.
exec::Work workOf(const std::shared_ptr<const plan::Plan>& p, int r, DataType type, RedOp op,
                  const Scalar& scalar = {}) {
  exec::Work w;
  w.plan = p;
  w.program = &p->programs[r];
  w.rank = r;
  w.type = type;
  w.buffers.assign(3 + 8, nullptr);
  exec::lowerOperator(&w, op, scalar);
  return w;
}

// "" when the blob encodes `w` as `low` lowered it, step by step; else the first difference.
std::string compare(const exec::Work& w, const exec::Lowered& low, const DevicePlanBlob& blob,
                    uint32_t slotBytes) {
  const DevicePlan* dp = blob.plan();
  const size_t es = dataTypeSize(w.type);
  if (dp->magic != kDevicePlanMagic || dp->rank != w.rank ||
      dp->type != static_cast<int32_t>(w.type) || dp->elemSize != es ||
      dp->sliceElems != slotBytes / es)
    return "header: rank, type or slice differs";
  if (dp->op != static_cast<int32_t>(w.op)) return "operator differs from the Work's";
  if (w.op == RedOp::kPreMulSum && std::memcmp(dp->scalar.bytes, w.scalar.bytes, 8) != 0)
    return "scalar differs from the Work's";
  if (dp->divisor != w.divisor || dp->divideCount != (w.divisor > 1 ? w.divideCount : 0))
    return "division differs from the Work's";
  const auto& lanes = w.program->lanes;
  if (dp->lanes != lanes.size()) return "lane count";
  uint32_t at = 0;
  for (uint32_t l = 0; l < lanes.size(); ++l) {
    if (laneFirst(dp)[l] != at || low.laneFirst[l] != at) return "lane " + std::to_string(l);
    for (uint32_t i = 0; i < lanes[l].steps.size(); ++i, ++at) {
      const plan::Step& s = lanes[l].steps[i];
      const DeviceStep& d = stepsOf(dp)[at];
      const std::string where = "lane " + std::to_string(l) + " step " + std::to_string(i) + ": ";
      if (d.op != static_cast<uint8_t>(s.op) || d.count != s.count || d.srcBuffer != s.src.buffer ||
          d.dstBuffer != s.dst.buffer || d.srcOffset != s.src.offset || d.dstOffset != s.dst.offset)
        return where + "operation or range differs from the program";
      if ((d.scaled != 0) != low.steps[at].scaled)
        return where + "scaled differs from the host lowering";
      if (d.depCount != s.deps.size()) return where + "dependencies";
      for (uint32_t k = 0; k < d.depCount; ++k) {
        const DeviceDep dep = depsOf(dp)[d.depFirst + k];
        if (dep.lane != static_cast<uint32_t>(s.deps[k].lane) ||
            dep.step != static_cast<uint32_t>(s.deps[k].step))
          return where + "dependency " + std::to_string(k);
      }
      const bool sends = plan::opSends(s.op), recvs = plan::opRecvs(s.op);
      if (sends != (d.sendLink >= 0) || recvs != (d.recvLink >= 0)) return where + "links";
      if (sends && (sendLinksOf(dp)[d.sendLink].peer != s.sendPeer ||
                    sendLinksOf(dp)[d.sendLink].channel != plan::sendChannelOf(lanes[l])))
        return where + "send link";
      if (recvs && (recvLinksOf(dp)[d.recvLink].peer != s.recvPeer ||
                    recvLinksOf(dp)[d.recvLink].channel != lanes[l].channel))
        return where + "receive link";
    }
  }
  if (dp->steps != at || laneFirst(dp)[dp->lanes] != at) return "step count";
  return "";
}

struct OpCase {
  DataType type;
  RedOp op;
};
const OpCase kOps[] = {{DataType::kFloat32, RedOp::kSum}, {DataType::kFloat32, RedOp::kAvg},
                       {DataType::kInt32, RedOp::kAvg},   {DataType::kFloat16, RedOp::kPreMulSum},
                       {DataType::kInt32, RedOp::kMax},   {DataType::kBfloat16, RedOp::kAvg}};

// Every rank of `p` under every operator case: the blob agrees with the host lowering; returns
// how many steps were scaled (reads of the input under PreMulSum).
int checkPlan(const std::shared_ptr<const plan::Plan>& p, const std::string& name) {
  int scaled = 0;
  const uint32_t slotBytes = 256;
  for (const OpCase& c : kOps)
    for (int r = 0; r < p->spec.nranks; ++r) {
      Scalar two;
      const uint16_t halfTwo = 0x4000;
      std::memcpy(two.bytes, &halfTwo, sizeof halfTwo);
      const exec::Work w = workOf(p, r, c.type, c.op, two);
      exec::Lowered low;
      exec::lower(w, &low);
      const DevicePlanBlob blob = encodeForDevice(w, low, slotBytes);
      const std::string bad = compare(w, low, blob, slotBytes);
      EXPECT_EQ(bad, "") << name << " rank " << r << " " << dataTypeName(c.type) << " "
                         << redOpName(c.op);
      const DevicePlanBlob again = encodeForDevice(w, slotBytes);
      EXPECT_TRUE(again.bytes() == blob.bytes() &&
                  std::memcmp(again.data(), blob.data(), blob.bytes()) == 0)
          << name << ": encoding the Work twice gives other bytes";
      for (uint32_t i = 0; i < blob.plan()->steps; ++i) scaled += stepsOf(blob.plan())[i].scaled;
    }
  return scaled;
}

TEST(DevicePlan, EncodesTheHostLoweringStepByStep) {
  int plans = 0, scaled = 0;
  for (const algo::Algorithm& a : algo::all())
    for (Collective coll : a.colls)
      for (int n : {2, 3, 4})
        for (uint64_t count : {uint64_t{1}, uint64_t{300}}) {
          plan::Spec spec;
          spec.coll = coll;
          spec.nranks = n;
          spec.count = count;
          spec.root = n - 1;
          algo::Options opt;
          opt.channels = count > 1 ? 2 : 1;
          std::shared_ptr<const plan::Plan> p;
          try {
            p = std::make_shared<const plan::Plan>(algo::build(a.name, spec, opt));
          } catch (const Error&) {
            continue;  // the algorithm does not build this shape
          }
          scaled += checkPlan(p, std::string(a.name) + " " + plan::collectiveName(coll) +
                                     " n=" + std::to_string(n) + " count=" + std::to_string(count));
          ++plans;
        }
  EXPECT_GT(plans, 100);
  EXPECT_GT(scaled, 0) << "PreMulSum and floating Avg scale reads of the input";
}

const std::string kMsccl = WEFT_SHARED_MSCCL;

TEST(DevicePlan, EncodesImportedMscclXmlAsLowered) {
  std::vector<std::string> files;
  if (DIR* top = opendir(kMsccl.c_str())) {
    while (dirent* d = readdir(top)) {
      if (d->d_name[0] == '.') continue;
      const std::string sub = kMsccl + "/" + d->d_name;
      if (DIR* inner = opendir(sub.c_str())) {
        while (dirent* f = readdir(inner)) {
          const std::string name = f->d_name;
          if (name.size() > 4 && name.substr(name.size() - 4) == ".xml")
            files.push_back(sub + "/" + name);
        }
        closedir(inner);
      }
    }
    closedir(top);
  }
  if (files.empty()) GTEST_SKIP() << "no MSCCL XML under " << kMsccl << " (../shared/msccl-xml)";
  for (const std::string& file : files) {
    const plan::ChunkPlan cp = plan::importMscclFile(file);
    const uint64_t mult = plan::sizeMultiplier(cp.coll, cp.nranks);
    uint64_t count = 2 * cp.chunksPerLoop;
    if (count % mult == 0) count /= mult;
    checkPlan(std::make_shared<const plan::Plan>(plan::instantiate(cp, count)), file);
  }
}

// The one lowering of an operator, as the Work and so the blob carry it.
TEST(DevicePlan, TheOperatorIsLoweredOnceIntoTheWork) {
  plan::Spec spec;
  spec.coll = Collective::kReduce;
  spec.nranks = 4;
  spec.count = 16;
  spec.root = 2;
  const auto p = std::make_shared<const plan::Plan>(algo::build("tree", spec));
  // Integer Avg: a sum, then the result divided, only on the rank that has one.
  const exec::Work root = workOf(p, 2, DataType::kInt32, RedOp::kAvg);
  EXPECT_EQ(root.op, RedOp::kSum);
  EXPECT_EQ(root.divisor, 4u);
  EXPECT_EQ(root.divideCount, 16u);
  const exec::Work other = workOf(p, 1, DataType::kInt32, RedOp::kAvg);
  EXPECT_EQ(other.op, RedOp::kSum);
  EXPECT_EQ(other.divisor, 0u);
  EXPECT_EQ(encodeForDevice(root, 64).plan()->divisor, 4u);
  EXPECT_EQ(encodeForDevice(other, 64).plan()->divisor, 0u);
  // Floating Avg: PreMulSum by the correctly rounded 1/n; no division.
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kFp8E4M3}) {
    const exec::Work w = workOf(p, 2, t, RedOp::kAvg);
    EXPECT_EQ(w.op, RedOp::kPreMulSum);
    EXPECT_EQ(w.divisor, 0u);
    EXPECT_EQ(std::memcmp(w.scalar.bytes, reciprocalScalar(t, 4).bytes, 8), 0) << dataTypeName(t);
    const DevicePlanBlob blob = encodeForDevice(w, 64);
    EXPECT_EQ(blob.plan()->op, static_cast<int32_t>(RedOp::kPreMulSum));
    EXPECT_EQ(std::memcmp(blob.plan()->scalar.bytes, w.scalar.bytes, 8), 0);
  }
  // PreMulSum keeps its handle's factor; other operators carry none.
  Scalar three;
  const float f3 = 3.0f;
  std::memcpy(three.bytes, &f3, sizeof f3);
  EXPECT_EQ(std::memcmp(workOf(p, 0, DataType::kFloat32, RedOp::kPreMulSum, three).scalar.bytes,
                        three.bytes, 8),
            0);
  EXPECT_EQ(std::memcmp(workOf(p, 0, DataType::kFloat32, RedOp::kMax, three).scalar.bytes,
                        Scalar{}.bytes, 8),
            0);
  // The convenience for a Plan and an unlowered call goes through the same lowering.
  const DevicePlanBlob viaCall =
      lowerForDevice(p->programs[2], spec, 2, {DataType::kInt32, RedOp::kAvg, {}, 64});
  const DevicePlanBlob viaWork = encodeForDevice(root, 64);
  ASSERT_EQ(viaCall.bytes(), viaWork.bytes());
  EXPECT_EQ(std::memcmp(viaCall.data(), viaWork.data(), viaCall.bytes()), 0);
  EXPECT_THROW(workOf(p, 0, DataType::kFloat32, static_cast<RedOp>(9)), Error);
}

// The encoding takes each step's scaling from the lowering it is given, never deciding it anew:
// a step the lowering marks differently comes out marked so.
TEST(DevicePlan, TakesEachStepsScalingFromTheHostLowering) {
  plan::Spec spec;
  spec.nranks = 3;
  spec.count = 30;
  const auto p = std::make_shared<const plan::Plan>(algo::build("ring", spec));
  const exec::Work w = workOf(p, 1, DataType::kFloat32, RedOp::kAvg);
  exec::Lowered low;
  exec::lower(w, &low);
  size_t flipped = low.steps.size();
  for (size_t i = 0; i < low.steps.size(); ++i)
    if (low.steps[i].scaled) flipped = i;
  ASSERT_LT(flipped, low.steps.size()) << "floating Avg scales some read of the input";
  low.steps[flipped].scaled = false;
  const DevicePlanBlob blob = encodeForDevice(w, low, 64);
  for (size_t i = 0; i < low.steps.size(); ++i)
    EXPECT_EQ(stepsOf(blob.plan())[i].scaled != 0, low.steps[i].scaled) << "step " << i;
}

TEST(DevicePlan, RefusesWhatTheHostDidNotLower) {
  plan::Spec spec;
  spec.nranks = 3;
  spec.count = 30;
  const auto p = std::make_shared<const plan::Plan>(algo::build("ring", spec));
  exec::Work w = workOf(p, 0, DataType::kFloat32, RedOp::kSum);
  w.op = RedOp::kAvg;  // as a path that skipped lowerOperator would leave it
  EXPECT_THROW(encodeForDevice(w, 64), Error);
  w.op = RedOp::kSum;
  exec::Lowered other;
  plan::Spec bigger = spec;
  bigger.count = 3000;
  algo::Options opt;
  opt.channels = 2;
  const auto q = std::make_shared<const plan::Plan>(algo::build("ring", bigger, opt));
  exec::lower(workOf(q, 0, DataType::kFloat32, RedOp::kSum), &other);
  EXPECT_THROW(encodeForDevice(w, other, 64), Error) << "a lowering of another program";
}

TEST(DevicePlan, AvgAndPreMulSum) {
  plan::Spec spec;
  spec.nranks = 4;
  spec.count = 16;
  const plan::Plan p = algo::build("ring", spec);
  DevicePlanBlob ints =
      lowerForDevice(p.programs[1], spec, 1, {DataType::kInt32, RedOp::kAvg, {}, 64});
  EXPECT_EQ(ints.plan()->op, static_cast<int32_t>(RedOp::kSum));
  EXPECT_EQ(ints.plan()->divisor, 4u);
  EXPECT_EQ(ints.plan()->divideCount, 16u);
  DevicePlanBlob floats =
      lowerForDevice(p.programs[1], spec, 1, {DataType::kFloat32, RedOp::kAvg, {}, 64});
  EXPECT_EQ(floats.plan()->op, static_cast<int32_t>(RedOp::kPreMulSum));
  EXPECT_EQ(floats.plan()->divisor, 0u);
  float quarter;
  std::memcpy(&quarter, floats.plan()->scalar.bytes, sizeof quarter);
  EXPECT_EQ(quarter, 0.25f);
  EXPECT_EQ(floats.plan()->sliceElems, 16u);
  // Scaled exactly where the step reads the input.
  const DevicePlan* dp = floats.plan();
  int scaled = 0;
  for (uint32_t i = 0; i < dp->steps; ++i) {
    const DeviceStep& s = stepsOf(dp)[i];
    const bool readsInput =
        s.srcBuffer == plan::kInput && plan::opReadsSrc(static_cast<plan::Op>(s.op));
    EXPECT_EQ(s.scaled != 0, readsInput);
    scaled += s.scaled;
  }
  EXPECT_GT(scaled, 0);
}

TEST(DevicePlan, TheBlobIsRelocatable) {
  plan::Spec spec;
  spec.nranks = 3;
  spec.count = 30;
  algo::Options opt;
  opt.channels = 2;
  const plan::Plan p = algo::build("ring", spec, opt);
  DevicePlanBlob blob =
      lowerForDevice(p.programs[2], spec, 2, {DataType::kFloat32, RedOp::kSum, {}, 64});
  std::vector<uint64_t> copy(blob.bytes() / 8 + 1);
  std::memcpy(copy.data(), blob.data(), blob.bytes());
  const auto* moved = reinterpret_cast<const DevicePlan*>(copy.data());
  ASSERT_EQ(moved->magic, kDevicePlanMagic);
  ASSERT_EQ(moved->lanes, p.programs[2].lanes.size());
  uint32_t step = 0;
  for (uint32_t l = 0; l < moved->lanes; ++l) {
    ASSERT_EQ(laneFirst(moved)[l], step);
    for (const plan::Step& s : p.programs[2].lanes[l].steps) {
      const DeviceStep& d = stepsOf(moved)[step++];
      EXPECT_EQ(d.op, static_cast<uint8_t>(s.op));
      EXPECT_EQ(d.count, s.count);
      EXPECT_EQ(d.srcOffset, s.src.offset);
      EXPECT_EQ(d.dstOffset, s.dst.offset);
      EXPECT_EQ(d.depCount, s.deps.size());
      if (d.sendLink >= 0) {
        EXPECT_EQ(sendLinksOf(moved)[d.sendLink].peer, s.sendPeer);
      }
      if (d.recvLink >= 0) {
        EXPECT_EQ(recvLinksOf(moved)[d.recvLink].peer, s.recvPeer);
      }
    }
  }
  EXPECT_EQ(laneFirst(moved)[moved->lanes], moved->steps);
}

TEST(DevicePlan, RefusesWhatOneBlockPerLaneCannotRun) {
  plan::Spec spec;
  spec.nranks = 2;
  spec.count = 8;
  plan::Program shared;
  shared.lanes.resize(2);
  for (auto& lane : shared.lanes) {
    plan::Step s;
    s.op = plan::Op::kSend;
    s.sendPeer = 1;
    s.count = 4;
    lane.steps.push_back(s);
  }
  EXPECT_THROW(lowerForDevice(shared, spec, 0, {DataType::kFloat32, RedOp::kSum, {}, 64}), Error);
  shared.lanes[1].channel = 1;  // a FIFO of its own: fine
  EXPECT_NO_THROW(lowerForDevice(shared, spec, 0, {DataType::kFloat32, RedOp::kSum, {}, 64}));
  shared.lanes[1].steps[0].deps.push_back({1, 0});  // on itself
  EXPECT_THROW(lowerForDevice(shared, spec, 0, {DataType::kFloat32, RedOp::kSum, {}, 64}), Error);
  shared.lanes[1].steps[0].deps = {{0, 0}};
  EXPECT_NO_THROW(lowerForDevice(shared, spec, 0, {DataType::kFloat32, RedOp::kSum, {}, 64}));
  EXPECT_THROW(lowerForDevice(shared, spec, 0, {DataType::kFloat32, RedOp::kSum, {}, 2}), Error)
      << "a slot smaller than an element";
}

}  // namespace
}  // namespace weft::cuda

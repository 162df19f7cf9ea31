// The device interpreter's form of one rank's Work: a flat, pointer-free blob (header, then
// arrays of lanes, steps, dependencies and links, found by byte offsets from the header) that is
// copied to device memory as is and read there by src/cuda/device_interp.h.
//
// Rule: the blob is a compact encoding of the same lowered program the host executor runs, never
// a lowering of its own. Its operator, scalar and integer-Avg division are the Work's, as
// exec::lowerOperator set them for the call (the communicator does it once per call for both
// paths); each step's `scaled` is exec::lower's decision for that step. So the two paths cannot
// disagree on what a call computes, and a rule changes in one place. What the encoding adds is
// what the kernel must not look up: which FIFO each step sends to and receives from (an index
// into the rank's send and receive link tables) and the slice size. Offsets and counts stay in
// elements; a step moves its range in slices of `sliceElems`, one FIFO slot each, so sender and
// receiver cut a step the same way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/datatype.h"
#include "src/common/host_device.h"

namespace weft::plan {
struct Program;
struct Spec;
}  // namespace weft::plan

namespace weft::exec {
struct Work;
struct Lowered;
}  // namespace weft::exec

namespace weft::cuda {

inline constexpr uint32_t kDevicePlanMagic = 0x57445031;  // "WDP1"
// Buffer ids a device step may name: Input, Output, Scratch and up to 29 Extra buffers (a p2p
// group's); DeviceRunArgs carries them inline, so the kernel needs no table of them.
inline constexpr uint32_t kMaxDeviceBuffers = 32;

struct DeviceStep {
  uint8_t op = 0;      // plan::Op
  uint8_t scaled = 0;  // reads of src are multiplied by the scalar (PreMulSum on the input)
  uint8_t srcBuffer = 0;
  uint8_t dstBuffer = 0;
  int16_t sendLink = -1;  // index into the rank's send FIFO table, -1: none
  int16_t recvLink = -1;  // index into the rank's receive FIFO table, -1: none
  uint32_t depFirst = 0;  // the step's dependencies: deps[depFirst, depFirst + depCount)
  uint32_t depCount = 0;
  uint64_t srcOffset = 0;  // elements
  uint64_t dstOffset = 0;  // elements
  uint64_t count = 0;      // elements
};

struct DeviceDep {
  uint32_t lane = 0;
  uint32_t step = 0;  // done once lane `lane` completed steps [0, step]
};

// One direction of a FIFO to a peer: (peer, channel).
struct DeviceLink {
  int32_t peer = -1;
  int32_t channel = 0;
};

// The blob's header; the arrays follow it at the given byte offsets.
struct DevicePlan {
  uint32_t magic = kDevicePlanMagic;
  int32_t rank = 0;
  uint32_t lanes = 0;
  uint32_t steps = 0;  // of all lanes
  uint32_t deps = 0;
  uint32_t sendLinks = 0;
  uint32_t recvLinks = 0;
  int32_t type = 0;  // DataType
  int32_t op = 0;    // Work::op: Sum, Prod, Max, Min or PreMulSum (never Avg)
  uint32_t elemSize = 0;
  Scalar scalar;            // Work::scalar: PreMulSum's factor (Avg on floats: 1/nranks)
  uint64_t sliceElems = 0;  // elements per FIFO message (slotBytes / elemSize)
  uint64_t divisor = 0;     // Work::divisor: Output[0, divideCount) /= divisor after all lanes
  uint64_t divideCount = 0;
  uint64_t laneFirstAt = 0;  // uint32_t[lanes + 1]: lane l's steps are [first[l], first[l+1])
  uint64_t stepsAt = 0;      // DeviceStep[steps]
  uint64_t depsAt = 0;       // DeviceDep[deps]
  uint64_t sendLinksAt = 0;  // DeviceLink[sendLinks]
  uint64_t recvLinksAt = 0;  // DeviceLink[recvLinks]
  uint64_t bytes = 0;        // the whole blob
};

// The arrays of a blob (wherever it was copied: host or device memory).
WEFT_HD_INLINE const uint32_t* laneFirst(const DevicePlan* p) {
  return reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(p) + p->laneFirstAt);
}
WEFT_HD_INLINE const DeviceStep* stepsOf(const DevicePlan* p) {
  return reinterpret_cast<const DeviceStep*>(reinterpret_cast<const char*>(p) + p->stepsAt);
}
WEFT_HD_INLINE const DeviceDep* depsOf(const DevicePlan* p) {
  return reinterpret_cast<const DeviceDep*>(reinterpret_cast<const char*>(p) + p->depsAt);
}
WEFT_HD_INLINE const DeviceLink* sendLinksOf(const DevicePlan* p) {
  return reinterpret_cast<const DeviceLink*>(reinterpret_cast<const char*>(p) + p->sendLinksAt);
}
WEFT_HD_INLINE const DeviceLink* recvLinksOf(const DevicePlan* p) {
  return reinterpret_cast<const DeviceLink*>(reinterpret_cast<const char*>(p) + p->recvLinksAt);
}

// A call's element type and operator as the user gave them (Avg and PreMulSum not yet lowered),
// and the FIFO slot size: for callers that hold a Plan but no communicator (tests).
struct DeviceCall {
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  Scalar scalar;           // PreMulSum's factor (ignored for other operators)
  uint32_t slotBytes = 0;  // FIFO slot size of every link the rank uses (same on every rank)
};

// An owned blob, 16-byte aligned.
class DevicePlanBlob {
 public:
  const DevicePlan* plan() const { return reinterpret_cast<const DevicePlan*>(storage_.data()); }
  const void* data() const { return storage_.data(); }
  size_t bytes() const { return plan()->bytes; }

 private:
  friend DevicePlanBlob encodeForDevice(const exec::Work&, const exec::Lowered&, uint32_t);
  struct alignas(16) Block {
    unsigned char b[16];
  };
  std::vector<Block> storage_;
};

// Encodes `w` (its operator lowered by exec::lowerOperator) with `lowered` (exec::lower of the
// same Work) into a blob whose FIFO messages are `slotBytes`. Throws
// weft::Error(kInvalidArgument) for an invalid type, an operator not lowered (Avg) or out of
// range, a slot smaller than an element, a buffer id past kMaxDeviceBuffers, a dependency that
// is not an earlier step of the same rank, a `lowered` of another program, or a link (peer,
// channel, direction) that two lanes share (one thread block owns each FIFO end, as in MSCCL).
DevicePlanBlob encodeForDevice(const exec::Work& w, const exec::Lowered& lowered,
                               uint32_t slotBytes);
// exec::lower(w), then the above.
DevicePlanBlob encodeForDevice(const exec::Work& w, uint32_t slotBytes);

// `rank`'s Program of a Plan for `spec` with the call `call`: the rank's Work (buffers not yet
// placed) with its operator lowered by exec::lowerOperator, encoded as above.
DevicePlanBlob lowerForDevice(const plan::Program& program, const plan::Spec& spec, int rank,
                              const DeviceCall& call);

}  // namespace weft::cuda

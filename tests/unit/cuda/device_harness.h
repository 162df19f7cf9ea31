// Runs a Plan's ranks two ways over the same inputs, for the device interpreter's host tests:
// through the device interpreter's shared source on host threads (one thread per rank x lane,
// FIFOs in host memory), and through the host executor (in-process pair FIFOs). Both start from
// the same Work per rank, its operator lowered once by exec::lowerOperator as a communicator
// does; the device one is that Work encoded (cuda::encodeForDevice). Buffers are raw bytes of
// any element type; in-place calls put the input where NCCL's in-place rules put it inside the
// output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/common/datatype.h"
#include "src/cuda/device_interp.h"
#include "src/plan/plan.h"

namespace weft::cuda::test {

using Bytes = std::vector<unsigned char>;

struct RunSetup {
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;  // as the user gives it: lowered by exec::lowerOperator
  Scalar scalar;           // PreMulSum's factor
  bool inPlace = false;
  uint32_t slotBytes = 256;
  uint32_t slots = 4;
  uint64_t timeoutNs = 20'000'000'000ull;
  int runs = 2;  // device runs over the same FIFOs and counters (epochs 1, 2, ...)
};

// Outputs of every rank (bufferSizes(spec, r).output elements). Throws weft::Error when a run
// fails (with the lane's DeviceStatus in the message) or when two device runs differ.
std::vector<Bytes> runDeviceInterpreter(const plan::Plan& plan, const std::vector<Bytes>& inputs,
                                        const RunSetup& setup);
std::vector<Bytes> runHostExecutor(const plan::Plan& plan, const std::vector<Bytes>& inputs,
                                   const RunSetup& setup);

// "error lane L step S waiting for W peer P" for test messages.
std::string describe(const DeviceStatus& status);

}  // namespace weft::cuda::test

#include "run_plan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "src/common/error.h"
#include "src/exec/executor.h"
#include "tests/support/pair_fabric.h"

namespace weft::synth::test {

std::vector<std::vector<int32_t>> runPlan(const plan::Plan& p,
                                          const std::vector<std::vector<int32_t>>& inputs,
                                          bool inPlace, uint32_t slotBytes) {
  const int n = p.spec.nranks;
  auto shared = std::make_shared<const plan::Plan>(p);
  weft::test::PairFabric fabric(n, 4, slotBytes, 0x5eed);
  std::vector<std::vector<int32_t>> outputs(n), mem(n);
  std::vector<exec::Task> tasks(n);
  std::atomic<bool> abort{false};
  for (int r = 0; r < n; ++r) {
    const plan::BufferSizes sz = plan::bufferSizes(p.spec, r);
    if (inputs[r].size() != sz.input)
      throw Error(Status::kInvalidArgument, "runPlan: rank " + std::to_string(r) + " input has " +
                                                std::to_string(inputs[r].size()) + " elements");
    exec::Work w = weft::test::rankWork(shared, r, fabric, &abort);
    w.type = DataType::kInt32;
    w.op = RedOp::kSum;
    auto scratch = std::make_shared<std::vector<int32_t>>(w.program->scratchElems + 1);
    w.keep = scratch;
    if (inPlace) {
      // One buffer; the input sits where NCCL's in-place rules put it inside the output.
      const uint64_t c = p.spec.count;
      const uint64_t inOff = p.spec.coll == plan::Collective::kAllGather ? r * c : 0;
      const uint64_t outOff = p.spec.coll == plan::Collective::kReduceScatter ? r * c : 0;
      mem[r].assign(std::max(sz.input + inOff, sz.output + outOff), -1);
      std::copy(inputs[r].begin(), inputs[r].end(), mem[r].begin() + inOff);
      w.buffers = {reinterpret_cast<char*>(mem[r].data() + inOff),
                   reinterpret_cast<char*>(mem[r].data() + outOff),
                   reinterpret_cast<char*>(scratch->data())};
    } else {
      mem[r] = inputs[r];
      outputs[r].assign(sz.output, -1);
      w.buffers = {reinterpret_cast<char*>(mem[r].data()),
                   reinterpret_cast<char*>(outputs[r].data()),
                   reinterpret_cast<char*>(scratch->data())};
    }
    tasks[r].units.push_back(std::move(w));
    tasks[r].bell = fabric.bell(r);
  }
  const exec::RunResult res = exec::run(tasks, std::chrono::milliseconds(20000));
  if (res.status != Status::kSuccess)
    throw Error(res.status, "runPlan: task " + std::to_string(res.failedTask) + ": " + res.message);
  if (inPlace)
    for (int r = 0; r < n; ++r) {
      const plan::BufferSizes sz = plan::bufferSizes(p.spec, r);
      const uint64_t outOff =
          p.spec.coll == plan::Collective::kReduceScatter ? r * p.spec.count : 0;
      outputs[r].assign(mem[r].begin() + outOff, mem[r].begin() + outOff + sz.output);
    }
  return outputs;
}

namespace {

int32_t inputValue(int rank, uint64_t i) {
  return (rank + 1) * 1000 + static_cast<int32_t>(i % 997);
}

}  // namespace

std::string runAndCheck(const plan::ChunkPlan& cp, uint64_t count) {
  using plan::Collective;
  const plan::Plan p = plan::instantiate(cp, count);
  const int n = p.spec.nranks;
  std::vector<std::vector<int32_t>> in(n);
  for (int r = 0; r < n; ++r) {
    in[r].resize(plan::bufferSizes(p.spec, r).input);
    for (uint64_t i = 0; i < in[r].size(); ++i) in[r][i] = inputValue(r, i);
  }
  auto sum = [&](uint64_t i) {
    int32_t s = 0;
    for (int q = 0; q < n; ++q) s += inputValue(q, i);
    return s;
  };
  auto expected = [&](int r, uint64_t i) {
    switch (cp.coll) {
      case Collective::kAllGather:
        return inputValue(static_cast<int>(i / count), i % count);
      case Collective::kAlltoAll:
        return inputValue(static_cast<int>(i / count), r * count + i % count);
      case Collective::kBroadcast:
        return inputValue(cp.root, i);
      case Collective::kReduceScatter:
        return sum(r * count + i);
      default:
        return sum(i);
    }
  };
  std::vector<bool> modes{false};
  if (cp.inPlace) modes.push_back(true);
  for (bool inPlace : modes) {
    const auto out = runPlan(p, in, inPlace, 256);
    for (int r = 0; r < n; ++r) {
      if (cp.coll == Collective::kReduce && r != cp.root) continue;
      for (uint64_t i = 0; i < out[r].size(); ++i) {
        const int32_t want = expected(r, i);
        if (out[r][i] != want)
          return cp.name + (inPlace ? " in place" : "") + ": rank " + std::to_string(r) +
                 " output[" + std::to_string(i) + "] = " + std::to_string(out[r][i]) +
                 ", expected " + std::to_string(want);
      }
    }
  }
  return "";
}

}  // namespace weft::synth::test

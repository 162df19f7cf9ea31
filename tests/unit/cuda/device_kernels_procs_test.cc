// The kernel path between processes sharing one GPU: FIFOs live in their receivers' device
// memory and travel to the senders as CUDA IPC handles through the bootstrap. Against the fake
// stream driver, whose device memory is shared memory another process can map and whose kernels
// run the interpreter on host threads: several layouts of processes x ranks, every collective
// kind on device memory, each rank on its own stream, results checked in every process.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/support/grid.h"
#include "tests/unit/cuda/fake_stream_api.h"

namespace {

using weft::test::FakeDeviceBuffer;
using Buffer = FakeDeviceBuffer<float>;

float valueOf(int rank, size_t i) { return float(rank + 1) + float(i % 5); }

// Whether the rank processes' calls must run in the interpreter's kernel (MPS runs), or must be
// staged (no MPS: kernels of separate processes on one GPU would be time-sliced). Set in each
// rank process before it starts.
bool expectKernels = true;

// A directory that looks like a running MPS daemon's pipe directory (it holds "control"), and
// one that does not.
std::string mpsDirectory(bool running) {
  char dir[] = "/tmp/weft-mps-XXXXXX";
  if (!mkdtemp(dir)) return "/nonexistent";
  if (running) std::fclose(std::fopen((std::string(dir) + "/control").c_str(), "w"));
  return dir;
}
const std::string kMpsRunning = mpsDirectory(true);
const std::string kNoMps = mpsDirectory(false);

// Runs each collective over this process's ranks (a group, each rank on its own stream) and
// checks every output; 0 when all is right.
int runCollectives(const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n) {
  const size_t count = 2000 + 17;
  const size_t k = comms.size();
  std::vector<void*> streams;
  std::vector<std::unique_ptr<Buffer>> send, recv;
  for (size_t j = 0; j < k; ++j) {
    streams.push_back(weftFakeStreamCreate());
    send.push_back(std::make_unique<Buffer>(count * n));
    recv.push_back(std::make_unique<Buffer>(count * n));
  }
  auto fill = [&] {
    for (size_t j = 0; j < k; ++j)
      for (size_t i = 0; i < count * n; ++i) {
        send[j]->p[i] = valueOf(ranks[j], i);
        recv[j]->p[i] = -1;
      }
  };
  auto run = [&](const char* what, auto&& call) {
    ncclGroupStart();
    for (size_t j = 0; j < k; ++j)
      if (ncclResult_t r = call(j, static_cast<cudaStream_t>(streams[j])); r != ncclSuccess) {
        std::fprintf(stderr, "%s rank %d: %s\n", what, ranks[j], ncclGetLastError(comms[j]));
        return false;
      }
    if (ncclGroupEnd() != ncclSuccess) return false;
    for (void* s : streams) weftFakeStreamSynchronize(s);
    for (size_t j = 0; j < k; ++j) {
      ncclResult_t e = ncclSuccess;
      ncclCommGetAsyncError(comms[j], &e);
      if (e != ncclSuccess) {
        std::fprintf(stderr, "%s rank %d: %s\n", what, ranks[j], ncclGetLastError(comms[j]));
        return false;
      }
    }
    return true;
  };
  auto expect = [&](const char* what, size_t j, size_t i, float got, float want) {
    if (got == want) return true;
    std::fprintf(stderr, "%s rank %d element %zu: %g, expected %g\n", what, ranks[j], i, got, want);
    return false;
  };
  float base = 0;
  for (int r = 0; r < n; ++r) base += float(r + 1);
  const uint64_t launches = weftFakeKernelLaunches();

  fill();
  if (!run("allreduce", [&](size_t j, cudaStream_t s) {
        return ncclAllReduce(send[j]->p, recv[j]->p, count, ncclFloat, ncclSum, comms[j], s);
      }))
    return 1;
  for (size_t j = 0; j < k; ++j)
    for (size_t i = 0; i < count; ++i)
      if (!expect("allreduce", j, i, recv[j]->p[i], base + float(n) * float(i % 5))) return 1;

  fill();
  if (!run("allgather", [&](size_t j, cudaStream_t s) {
        return ncclAllGather(send[j]->p, recv[j]->p, count, ncclFloat, comms[j], s);
      }))
    return 1;
  for (size_t j = 0; j < k; ++j)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        if (!expect("allgather", j, i, recv[j]->p[q * count + i], valueOf(q, i))) return 1;

  fill();
  if (!run("reducescatter", [&](size_t j, cudaStream_t s) {
        return ncclReduceScatter(send[j]->p, recv[j]->p, count, ncclFloat, ncclSum, comms[j], s);
      }))
    return 1;
  for (size_t j = 0; j < k; ++j)
    for (size_t i = 0; i < count; ++i) {
      const size_t at = ranks[j] * count + i;
      if (!expect("reducescatter", j, i, recv[j]->p[i], base + float(n) * float(at % 5))) return 1;
    }

  fill();
  const int root = n - 1;
  if (!run("broadcast", [&](size_t j, cudaStream_t s) {
        return ncclBroadcast(send[j]->p, recv[j]->p, count, ncclFloat, root, comms[j], s);
      }))
    return 1;
  for (size_t j = 0; j < k; ++j)
    for (size_t i = 0; i < count; ++i)
      if (!expect("broadcast", j, i, recv[j]->p[i], valueOf(root, i))) return 1;

  fill();
  if (!run("sendrecv", [&](size_t j, cudaStream_t s) {
        const int r = ranks[j];
        ncclResult_t a = ncclSend(send[j]->p, count, ncclFloat, (r + 1) % n, comms[j], s);
        ncclResult_t b = ncclRecv(recv[j]->p, count, ncclFloat, (r + n - 1) % n, comms[j], s);
        return a != ncclSuccess ? a : b;
      }))
    return 1;
  for (size_t j = 0; j < k; ++j)
    for (size_t i = 0; i < count; ++i)
      if (!expect("sendrecv", j, i, recv[j]->p[i], valueOf((ranks[j] + n - 1) % n, i))) return 1;

  fill();
  if (!run("alltoall", [&](size_t j, cudaStream_t s) {
        return ncclAlltoAll(send[j]->p, recv[j]->p, count, ncclFloat, comms[j], s);
      }))
    return 1;
  for (size_t j = 0; j < k; ++j)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        if (!expect("alltoall", j, i, recv[j]->p[q * count + i], valueOf(q, ranks[j] * count + i)))
          return 1;

  if (expectKernels && weftFakeKernelLaunches() == launches) {
    std::fprintf(stderr, "process of rank %d: no call ran in the interpreter's kernel\n", ranks[0]);
    return 1;
  }
  if (!expectKernels && weftFakeKernelLaunches() != launches) {
    std::fprintf(stderr, "process of rank %d: calls ran in kernels without MPS\n", ranks[0]);
    return 1;
  }
  for (void* s : streams) weftFakeStreamDestroy(s);
  return 0;
}

class DeviceKernelProcesses : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(DeviceKernelProcesses, EveryCollectiveOnOneGpu) {
  if (!weft::test::kKernelImage)
    GTEST_SKIP() << "built without nvcc: no kernel image, calls on device memory are staged";
  const auto [procs, perProc] = GetParam();
  const std::vector<int> codes = weft::test::forkRanks(
      procs, perProc, runCollectives,
      [](int) {
        setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1);
        setenv("CUDA_MPS_PIPE_DIRECTORY", kMpsRunning.c_str(), 1);
      },
      240);
  for (size_t p = 0; p < codes.size(); ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

// Without MPS the fake runs kernels of separate processes one at a time, as time-sliced contexts
// do: kernels waiting for each other across processes would never end, so the communicator
// stages its calls (copy engines and host), with the same results.
TEST_P(DeviceKernelProcesses, WithoutMpsProcessesSharingAGpuAreStaged) {
  if (!weft::test::kKernelImage)
    GTEST_SKIP() << "built without nvcc: no kernel image, calls on device memory are staged";
  const auto [procs, perProc] = GetParam();
  const std::vector<int> codes = weft::test::forkRanks(
      procs, perProc, runCollectives,
      [](int) {
        setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1);
        setenv("CUDA_MPS_PIPE_DIRECTORY", kNoMps.c_str(), 1);
        setenv("WEFT_FAKE_NO_MPS", (kNoMps + "/gpu0.lock").c_str(), 1);
        setenv("WEFT_TIMEOUT_MS", "20000", 1);
        expectKernels = false;
      },
      240);
  for (size_t p = 0; p < codes.size(); ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
}

// The fake's no-MPS mode withholds what the kernel path needs: were it taken anyway (an MPS pipe
// that no daemon serves), the kernels of the two processes, which wait for each other, would run
// one at a time, and the calls end with the timeout's error instead of results.
TEST(DeviceKernelProcessesNoMps, TimeSlicedKernelsWaitingForEachOtherFail) {
  if (!weft::test::kKernelImage)
    GTEST_SKIP() << "built without nvcc: no kernel image, calls on device memory are staged";
  const std::vector<int> codes = weft::test::forkRanks(
      2, 1, runCollectives,
      [](int) {
        setenv("WEFT_CUDA_DRIVER", WEFT_FAKE_STREAM_DRIVER, 1);
        setenv("CUDA_MPS_PIPE_DIRECTORY", kMpsRunning.c_str(), 1);
        setenv("WEFT_FAKE_NO_MPS", (kNoMps + "/sliced.lock").c_str(), 1);
        setenv("WEFT_FAKE_SYNC_LIMIT_MS", "3000", 1);
        setenv("WEFT_TIMEOUT_MS", "500", 1);
      },
      120);
  for (size_t p = 0; p < codes.size(); ++p) EXPECT_NE(codes[p], 0) << "process " << p;
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeviceKernelProcesses,
                         ::testing::Values(std::pair{2, 1}, std::pair{3, 1}, std::pair{2, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "x" +
                                  std::to_string(info.param.second);
                         });

}  // namespace

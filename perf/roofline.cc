#include "perf/roofline.h"

#include <cstdio>

namespace weft::perf {

// The model. n ranks, all on one GPU, so that every byte any rank's kernel reads or writes goes
// through the same HBM; N is the table's size column, the larger of a rank's two buffers in bytes.
// A rank's traffic is the call's whole traffic divided by n (for rooted collectives, where the
// root moves more, that is the average rank's). Caches are ignored: at the sizes where the bound
// matters (256 MiB per rank) nothing stays in the GPU's L2 between two ranks' reads. Peers are read
// and written directly (same process, CUDA IPC or peer access), so a byte crosses the memory
// once per read and once per write, with no staging copy.
//
// allreduce, input N and output N per rank:
//   minimum      every input read once (n*N), every output written once (n*N): per rank
//                read N + write N.
//   one-shot     each rank reads all n inputs and writes its own output: read n*N + write N, so
//                the GPU moves n*(n+1)*N; only worth it where latency, not bytes, dominates.
//   two-shot     reduce-scatter then allgather. Rank r reduces part r (N/n bytes) of all n
//                inputs: reads n * N/n = N. Pushed: it writes the reduced part straight into all
//                n outputs, n * N/n = N; read N + write N, the minimum. Pulled: it writes the part
//                into its own output (N/n), then reads the n-1 other reduced parts from the peers'
//                outputs ((n-1)*N/n) and writes them into its own ((n-1)*N/n): read (2n-1)/n * N,
//                write N.
//   In place the same (every output byte is still rewritten from every input).
// allgather, output N per rank, input N/n: each input read once (N/n per rank), written into
//   the n outputs: read N/n + write N (the pushed direct kernel moves exactly that; pulling, each
//   rank reads all n parts, read N + write N). In place a rank's own part is already in its
//   output: write (n-1)/n * N.
// reduce-scatter, input N per rank, output N/n: rank r reads part r of all n inputs (N) and writes
//   its output: read N + write N/n. In place the same.
// broadcast, input N at the root, output N everywhere: the root's input read once (N/n per rank),
//   every output written: read N/n + write N. In place the root's output is its input:
//   write (n-1)/n * N. (A kernel where each rank pulls from the root reads it n times: read N.)
// reduce, input N everywhere, output N at the root: read N + write N/n. In place the same.
// alltoall, input N and output N per rank: read N + write N; in place the block a rank keeps for
//   itself stays: read and write (n-1)/n * N.
// sendrecv, each rank sends N and receives N: read N + write N, in place as well.
// gather, output N at the root, input N/n everywhere: the n inputs (N in all) read once and
//   written into the root's output (N): read N/n + write N/n per rank; in place the root's own
//   part stays: (n-1)/n^2 * N each way. scatter is its mirror (input N at the root, output N/n).
Traffic directTraffic(Pattern pattern, int nranks, bool inPlace, Kernel kernel) {
  if (nranks < 1) return {};
  const double n = nranks;
  const double others = (n - 1) / n;  // the share of the parts not a rank's own
  switch (pattern) {
    case Pattern::kAllReduce:
      switch (kernel) {
        case Kernel::kOneShot:
          return {n, 1};
        case Kernel::kTwoShotPull:
          return {(2 * n - 1) / n, 1};
        case Kernel::kMinimum:
        case Kernel::kTwoShotPush:
          return {1, 1};
      }
      return {};
    case Pattern::kAllGather:
      return {1 / n, inPlace ? others : 1};
    case Pattern::kReduceScatter:
    case Pattern::kReduce:
      return {1, 1 / n};
    case Pattern::kBroadcast:
      return {1 / n, inPlace ? others : 1};
    case Pattern::kAlltoall:
      return inPlace ? Traffic{others, others} : Traffic{1, 1};
    case Pattern::kSendRecv:
      return {1, 1};
    case Pattern::kGather:
    case Pattern::kScatter:
      return inPlace ? Traffic{others / n, others / n} : Traffic{1 / n, 1 / n};
    case Pattern::kNone:
      return {};
  }
  return {};
}

double outputFactor(Pattern pattern, int nranks) {
  if (nranks < 1) return 0;
  const double n = nranks;
  switch (pattern) {
    case Pattern::kAllReduce:
    case Pattern::kAllGather:
    case Pattern::kBroadcast:
    case Pattern::kAlltoall:
    case Pattern::kSendRecv:
      return 1;
    // One rank's output (reduce, gather) or each rank's part (reduce-scatter, scatter): N/n per
    // rank on average.
    case Pattern::kReduceScatter:
    case Pattern::kReduce:
    case Pattern::kGather:
    case Pattern::kScatter:
      return 1 / n;
    case Pattern::kNone:
      return 0;
  }
  return 0;
}

double hbmGBps(long long memoryClockKHz, long long busWidthBits) {
  if (memoryClockKHz <= 0 || busWidthBits <= 0) return 0;
  // Double data rate: two transfers of the bus's width per clock.
  return 2.0 * static_cast<double>(memoryClockKHz) * 1e3 * static_cast<double>(busWidthBits) / 8.0 /
         1e9;
}

double boundUs(const Traffic& traffic, double bytes, int ranksOnGpu, double gbps) {
  if (gbps <= 0 || ranksOnGpu < 1 || traffic.total() <= 0) return 0;
  // gbps * 1e3 bytes per microsecond.
  return ranksOnGpu * traffic.total() * bytes / (gbps * 1e3);
}

double boundFraction(double boundUs, double measuredUs) {
  return measuredUs > 0 ? boundUs / measuredUs : 0;
}

std::string rooflineLine(Pattern pattern, int nranks, int ranksOnGpu, double gbps,
                         const std::string& source) {
  const Traffic t = directTraffic(pattern, nranks, false);
  const double out = outputFactor(pattern, nranks);
  char buf[512];
  int used = std::snprintf(
      buf, sizeof buf,
      "Roofline: HBM %.0f GB/s (%s); %d rank(s) on the GPU; bytes moved per rank per byte of "
      "size: read %.3f + write %.3f = %.3f (%.3f per byte of output); bound(us) = ranks on the "
      "GPU x that x size / HBM; frac = bound / time",
      gbps, source.c_str(), ranksOnGpu, t.read, t.write, t.total(), out > 0 ? t.total() / out : 0);
  if (pattern == Pattern::kAllReduce && used > 0 && static_cast<size_t>(used) < sizeof buf) {
    const Traffic one = directTraffic(pattern, nranks, false, Kernel::kOneShot);
    const Traffic pull = directTraffic(pattern, nranks, false, Kernel::kTwoShotPull);
    std::snprintf(buf + used, sizeof buf - static_cast<size_t>(used),
                  " (the minimum, a two-shot kernel that pushes its reduced part; one-shot "
                  "moves %.3f, two-shot pulling %.3f)",
                  one.total(), pull.total());
  }
  return buf;
}

}  // namespace weft::perf

// The memory-traffic bound (roofline) the perf tools print next to each measurement on device
// memory: the bytes a collective must move through the GPU's memory, per rank, and the time that
// takes at the card's HBM bandwidth. Pure functions, no CUDA: the tools feed them the driver's
// numbers (perf/device.h) and tests/perf/roofline_test.cc checks them.
#pragma once

#include <string>

namespace weft::perf {

// The data movement of a collective, as the roofline sees it.
enum class Pattern {
  kNone,  // no model (hypercube): nothing is printed
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAlltoall,
  kSendRecv,
  kGather,
  kScatter,
};

// How an allreduce's direct kernel moves its data (see roofline.cc for the derivations).
enum class Kernel {
  kMinimum,      // the least any algorithm can move: each input read once, each output written once
  kOneShot,      // every rank reads every rank's whole input and writes its own output
  kTwoShotPull,  // reduce-scatter into its own output, then each rank pulls the others' parts
  kTwoShotPush,  // reduce-scatter whose reduced part is written straight into every output
};

// Bytes moved per rank by one call, as multiples of N, the size column of the table (the larger
// of a rank's send and receive buffers in bytes): `read` * N read and `write` * N written. With n
// ranks on one GPU the GPU's memory moves n times that.
struct Traffic {
  double read = 0;
  double write = 0;
  double total() const { return read + write; }
};

// The traffic of `pattern` with `nranks` ranks (out of place or in place) for `kernel`. Only
// kAllReduce distinguishes kernels; every other pattern gives its minimum for any kernel.
// kNone, or nranks < 1, gives zero traffic.
Traffic directTraffic(Pattern pattern, int nranks, bool inPlace, Kernel kernel = Kernel::kMinimum);

// Bytes of output per rank, as a multiple of N (allgather 1, reduce-scatter 1/n, ...): a rank's
// traffic per byte of its output is directTraffic(...).total() / outputFactor(...).
double outputFactor(Pattern pattern, int nranks);

// The HBM bandwidth in 1e9 bytes per second from the driver's memory clock (kHz, the data moving
// on both edges of it) and bus width (bits); 0 when either is unknown (not positive).
double hbmGBps(long long memoryClockKHz, long long busWidthBits);

// The least time in microseconds a call of `bytes` (the size column) can take when `ranksOnGpu`
// ranks share one GPU of `gbps` HBM bandwidth: ranksOnGpu * traffic * bytes / bandwidth.
// 0 when the traffic or the bandwidth is zero.
double boundUs(const Traffic& traffic, double bytes, int ranksOnGpu, double gbps);

// The fraction of the bound a measured time reaches: boundUs / measuredUs (0 when measuredUs is
// not positive).
double boundFraction(double boundUs, double measuredUs);

// The header line that states the model of one run, e.g. "Roofline: HBM 4915 GB/s (...);
// 2 rank(s) on the GPU; per rank and byte of size: read 1.00 + write 1.00 = 2.00 ...".
std::string rooflineLine(Pattern pattern, int nranks, int ranksOnGpu, double gbps,
                         const std::string& source);

}  // namespace weft::perf

// Internals of the plan verifier (src/plan/verifier.h), one check a file:
//   verifier.cc                verify(), verifyMessage() and the text of every message
//   verifier_structure.cc      well-formedness without running anything: shapes, peers, bounds,
//                              dependencies and their cycles
//   verifier_simulator.cc      the run of every lane over bounded FIFOs: matching sends with
//                              receives, the order of a FIFO's users, deadlocks
//   verifier_memory.cc         what each element holds: the buffers' layout and aliasing, the
//                              values steps read, write and reduce, races between lanes
//   verifier_postcondition.cc  the outputs hold what the collective computes
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "src/plan/plan.h"
#include "src/plan/verifier.h"

namespace weft::plan::detail {

// Throws the verifier's Error(kInvalidArgument) for `message`.
[[noreturn]] void reject(const std::string& message);
// "input", "output", "scratch", "extra<i>".
std::string bufferText(uint16_t buffer);
// "rank r lane l step s (op from=.. to=.. n=..)".
std::string stepText(int rank, int lane, int step, const Step& s);

// Well-formedness that needs no simulation: shapes, peers, bounds, dependencies.
void checkStructure(const Plan& plan);

// The values of a run of elements: each holds the sum of some ranks' copies of one element index
// (a bitset of ranks, `words` 64-bit words per element).
struct Values {
  std::vector<uint64_t> idx;
  std::vector<uint64_t> mask;
};

// Vector clocks over all lanes of all ranks. Step k of a lane has the events start, access
// (first data received, or sending begins), one per slice it moves, and end, in this order.
using Clock = uint64_t;
constexpr Clock kStepStride = Clock{1} << 32;
constexpr Clock stepStamp(uint64_t k, uint64_t event) { return k * kStepStride + event; }
constexpr Clock startStamp(uint64_t k) { return stepStamp(k, 1); }
constexpr Clock accessStamp(uint64_t k) { return stepStamp(k, 2); }
constexpr Clock sliceStamp(uint64_t k, uint64_t j) {
  return stepStamp(k, 3 + std::min<uint64_t>(j, kStepStride - 5));
}
constexpr Clock endStamp(uint64_t k) { return stepStamp(k, kStepStride - 1); }

struct Slice {
  int32_t sender = -1;  // global step id
  uint64_t msgCount = 0;
  Values values;
  std::vector<Clock> vc;  // the sender's clock as it sent this slice
};

// An access to an element by a step, finished once an observer's clock for the step's lane
// reaches `done` (the step's end; a slice's stamp for what a slice of a message moves).
struct Access {
  int32_t step = -1;
  Clock done = 0;
};

struct Fifo {
  int from = 0, to = 0, channel = 0;
  std::deque<Slice> q;
  int32_t lastSender = -1;
  int32_t lastReceiver = -1;
};

// One rank's memory: every buffer of the rank mapped into one array of elements, so aliasing
// buffers share elements.
struct Arena {
  // kOrigCopied: original input that a skipped in-place copy made readable through any buffer.
  enum : uint8_t { kUninit = 0, kOrig = 1, kValue = 2, kOrigCopied = 3 };
  std::vector<uint8_t> state;
  std::vector<uint64_t> idx;
  std::vector<uint64_t> mask;
  std::vector<Access> writer;                // last write
  std::vector<std::vector<Access>> readers;  // reads since, one per lane
  std::vector<uint64_t> base;                // per buffer id
};

struct LaneRun {
  int rank = 0, lane = 0;
  size_t step = 0;
  bool started = false;
  uint64_t slice = 0, nslices = 0;
  int32_t msgSender = -1;
  std::vector<Clock> vc;  // see Clock
};

class Simulator {
 public:
  Simulator(const Plan& plan, const VerifyOptions& opt, bool inPlace);

  void run();

 private:
  std::string mode() const { return inPlace_ ? "(in-place) " : ""; }

  // The run (verifier_simulator.cc).
  std::string describe(int32_t gid) const;
  void setupSteps();
  int32_t gid(int rank, int lane, int step) const {
    return gidBase_[laneBase_[rank] + lane] + step;
  }

  static void join(std::vector<Clock>& into, const std::vector<Clock>& from);
  void complete(size_t g, int32_t me);
  bool advance(size_t g);
  void reportDeadlock();

  // The elements (verifier_memory.cc).
  void setupArenas();
  bool ordered(size_t g, int32_t prev) const;
  bool ordered(size_t g, const Access& x) const;
  void access(size_t g, int32_t me, const Ref& ref, uint64_t i, bool write);
  Values read(size_t g, int32_t me, const Ref& ref, uint64_t off, uint64_t count);
  void write(size_t g, int32_t me, const Ref& ref, uint64_t off, const Values& v);
  void reduce(int32_t me, Values& acc, const Values& other);
  bool sameElements(size_t g, const Ref& a, const Ref& b) const;
  void copyInPlace(size_t g, int32_t me, const Step& st);
  void checkOverlap(size_t g, int32_t me, const Step& st);

  // The result (verifier_postcondition.cc).
  std::string maskText(const uint64_t* mask) const;
  void checkPostcondition();

  const Plan& plan_;
  const int n_;
  const bool inPlace_;
  const bool inPlaceOnly_;  // plan.outOfPlaceSafe is false: Input is the output buffer too
  int words_ = 1;
  uint64_t slice_ = 1;
  int slots_ = 2;
  bool reduction_ = false;        // PreMulSum may apply: copies onto themselves rewrite memory
  std::vector<LaneRun> lanes_;    // global lanes, rank-major
  std::vector<size_t> laneBase_;  // first global lane of each rank
  std::vector<int32_t> gidBase_;  // first global step id of each global lane
  std::vector<uint32_t> gLane_;   // global step id -> global lane
  std::vector<uint32_t> gIndex_;  // global step id -> step index in its lane
  std::vector<int32_t> sendFifo_, recvFifo_;
  std::vector<char> completed_, needEnd_;
  std::vector<std::vector<Clock>> vcEnd_;
  Clock accessDone_ = 0;  // when the accesses being recorded finish (see Access)
  std::vector<Fifo> fifos_;
  std::vector<Arena> arenas_;
};

}  // namespace weft::plan::detail

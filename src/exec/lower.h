// Lowering: what the executor derives from a Work once, before interpreting it, and keeps while
// a Work of the same stamp runs again (a repeated call). Every step gets the transfer modes it
// may use (a slot, a reference to the sender's memory, a landing in the receiver's buffer) and
// the store kind of what it writes, decided here from the communicator's Tuning, so the
// interpreter (interpreter.cc) never asks which collective it runs. What a slice finally uses
// is settled when it moves, because only then does the link say whether the peer can read this
// address or has offered a landing.
//
// One lowering for host and device: a call's operator is lowered once, when its Work is built
// (lowerOperator: Avg and PreMulSum handles rewritten), and the device interpreter's blob
// (src/cuda/device_plan.h) is an encoding of that Work and of lower()'s per-step decisions that
// apply there (which reads are scaled), so the two executors cannot disagree on what a call
// computes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/common/reduce.h"
#include "src/exec/work.h"
#include "transports/base/capabilities.h"

namespace weft::exec {

struct LoweredStep {
  // The step's links, looked up when the step first begins (links connect lazily) and kept.
  transport::Connection* send = nullptr;
  transport::Connection* recv = nullptr;
  // Their capabilities (transports/base/capabilities.h), null where a link has none.
  transport::ReferenceSends* sendRefs = nullptr;
  transport::PeerMemory* sendMemory = nullptr;
  transport::PeerMemory* recvMemory = nullptr;
  bool linked = false;
  Store store = Store::kCached;        // how it writes its destination
  Store landedStore = Store::kCached;  // how it writes what it also stores into a landing
  bool scaled = false;                 // reads of its source are scaled (PreMulSum over the input)
  // Transfer modes the step may use beside a slot; each also needs its link's capability,
  // known once the step links (Interpreter::beginStep clears what the link lacks).
  bool mayLand = false;  // its sends may store into the receiver's offered landing
  bool mayRef = false;   // slices of at least Lowered::rdvBytes may go by reference
  bool bigRefs = false;  // a plain send whose by-reference messages may span many slices
  bool offers = false;   // a receive whose run of receives may be offered as a landing
};

struct Lowered {
  uint64_t stamp = 0;              // the stamp of the Work lowered; 0: none or unnamed
  std::vector<LoweredStep> steps;  // lane l's steps from laneFirst[l] on
  std::vector<size_t> laneFirst;
  std::vector<uint32_t> bursts;  // per lane where the plan's lane shares differ; else empty
  size_t elemSize = 1;
  uint64_t rdvBytes = 0;      // smallest slice sent by reference
  uint64_t landingBytes = 0;  // smallest run of receives offered as a landing; 0: never
  uint64_t bigRefBytes = 0;   // largest by-reference message of a bigRefs step
  bool holdsCore = false;     // small exchange: a rank may keep a shared core while it waits
  bool readsOwnInput = true;  // false for a broadcast's or scatter's non-root
  uint64_t inputBytes = 0;    // this rank's input

  LoweredStep& at(size_t lane, size_t step) { return steps[laneFirst[lane] + step]; }
};

// Lowers `w` into `out` (reusing its storage).
void lower(const Work& w, Lowered* out);

// Sets w's operator fields (op, scalar, divisor, divideCount) for a call's operator `op`, from
// what w already holds (plan, rank, type): the one lowering of an operator, used for every call
// whether the host executor or the device interpreter runs it. Avg becomes PreMulSum by 1/n on
// the floating types (the factor correctly rounded to the type) and Sum then a division by n of
// the rank's result (the plan's count of elements; none on a reduce's non-root) on the integers,
// n being the plan's ranks; PreMulSum keeps `scalar` (its op handle's factor); the other
// operators stay as they are. Throws weft::Error(kInvalidArgument) for an operator past
// PreMulSum.
void lowerOperator(Work* w, RedOp op, const Scalar& scalar);

// Whether lowerOperator makes `op` on `type` a PreMulSum (reads of the input scaled): for plan
// selection, which must know before any Work exists.
bool lowersToPreMulSum(RedOp op, DataType type);

// Runs what follows a Work's last step: Avg's integer division, then `finish`.
void finishWork(Work& w);

// Whether `w` runs on the interpreter's fast path (runStraight), and with which steps and links.
// May throw where ConnectionSource::connection() does, before anything is done.
StraightShape lowerStraight(const Work& w);

// Slices each lane of `program` may move per pass of the interpreter over its lanes: 16 for every
// lane when all shares are equal (the fairness burst), else in proportion to plan::Lane::share,
// the smallest share getting 16 (at most 1024 a pass). So where lanes contend for one thread's
// time (the copies and reductions of all lanes run on it), each gets its share of it.
std::vector<uint32_t> laneBursts(const plan::Program& program);

// Slices a lane moves before the next lane's turn, when all lanes weigh the same.
inline constexpr uint32_t kLaneBurst = 16;

}  // namespace weft::exec

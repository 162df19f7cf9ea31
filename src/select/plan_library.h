// A table of ChunkPlans the selector may use instead of the built-in algorithms: MSCCL XML files
// loaded at communicator init (MSCCL_ALGO_DIR, WEFT_PLAN_DIR) and plans a synthesizer adds with
// a predicted cost. Each plan carries MSCCL's selection window: collective, ranks, a byte range
// and whether it may run in place and/or out of place.
//
// In-place-only plans (MSCCL inplace=1 outofplace=0, which treat "i" as the one user buffer) of
// allreduce and allgather run on the output buffer: a copy of the input into the rank's place in
// the output comes first (nothing to do for an in-place call, unless PreMulSum scales it) and
// every reference to "i" goes there. So they serve in-place and out-of-place calls alike, every
// rank picks the same plan whatever its buffers, and PreMulSum scales the input exactly once.
// In-place-only plans of other collectives run only for in-place calls without PreMulSum.
//
// Weft's executor runs each step over its whole range (in slot-sized slices), where MSCCL runs
// the whole program once per slice. The two agree when every message of a step fits one FIFO
// slot, which is the regime verify() covers when a plan is added. A plan is also verified with
// every message longer than the FIFO (each chunk 3, then 5 slices; 2 slots): one that passes
// streams its messages (a receiver is never stuck behind its own send) and runs whole at any
// count. One that needs buffering (MSCCL's allpairs sends a whole message before receiving its
// peer's) runs in pieces instead wherever its messages exceed the communicator's slot: cut with
// plan::cutIntoPieces, MSCCL's own slicing, so every message fits a slot. Its pieced form is
// verified when it is added; a plan whose pieces fail too (a step over many chunks sending more
// messages than two slots hold before it receives) keeps to counts whose messages fit a slot.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/common/tuning.h"
#include "src/plan/chunk_plan.h"
#include "src/plan/pieces.h"

namespace weft::select {

struct LibraryPlan {
  std::shared_ptr<const plan::ChunkPlan> plan;
  std::string source;          // file path, or what added it ("synth:ring", ...)
  double predictedUs = 0;      // 0: none; such plans (files) are used whenever they match
  uint64_t maxStepChunks = 0;  // the largest `count` of any step, in chunks
  bool streams = false;        // runs whole with messages longer than the FIFO (see above)
  bool pieces = false;         // runs in pieces where its messages exceed a slot (see above)
  int id = 0;                  // unique in its library (plan cache keys)
};

// One call, as the library sees it.
struct LibraryQuery {
  plan::Collective coll = plan::Collective::kAllReduce;
  int nranks = 1;
  int root = 0;
  uint64_t count = 0;  // API count
  uint32_t elemSize = 4;
  bool inPlace = false;  // the call's buffers alias as NCCL's in-place rules say
  // The reduction scales reads of the input (PreMulSum, float Avg): in-place-only plans, which
  // write the input buffer and read it again, cannot run it.
  bool scalesInput = false;
  uint64_t slotBytes = 128 * 1024;  // FIFO slot of the communicator
};

class PlanLibrary {
 public:
  // Adds a plan after checking it: it must instantiate at its smallest count and, with `verify`,
  // pass plan::verify() there in every mode it allows. Throws weft::Error(kInvalidArgument) with
  // the reason otherwise. `predictedUs` is the cost a synthesizer predicts (0 = none).
  const LibraryPlan& add(plan::ChunkPlan plan, std::string source, double predictedUs = 0,
                         bool verify = true);
  // Adds an already checked entry (from the process-wide file cache).
  const LibraryPlan& addChecked(std::shared_ptr<const plan::ChunkPlan> plan, std::string source,
                                double predictedUs, bool streams, bool pieces);

  // The plan to use for a call, or nullptr: collective, ranks, root, in/out-of-place, byte window
  // (sizeMultiplier * count * elemSize in [minBytes, maxBytes]) and equal chunks must all match
  // (and messages that fit a slot, for the rare plan that neither streams nor runs in pieces).
  // Plans without a predicted cost win in the order they were added, then the lowest predicted
  // cost.
  const LibraryPlan* match(const LibraryQuery& q) const;

  bool empty() const { return plans_.empty(); }
  const std::vector<LibraryPlan>& plans() const { return plans_; }
  // One line per plan, for the TUNING log.
  std::string describe() const;
  // The plans' names and selection windows, "; "-separated ("'name' (allgather, 8 ranks,
  // 33554432-1073741824 bytes, out of place only); ..."), or "none".
  std::string windows() const;

 private:
  std::vector<LibraryPlan> plans_;
  int nextId_ = 0;
};

// What add() finds out about a plan.
struct PlanCheck {
  std::string error;     // "" when the plan may be used, else the reason
  bool streams = false;  // verified with messages longer than the FIFO (false without `verify`)
  bool pieces = false;   // its pieced form verified (false without `verify`, or when it streams)
};
PlanCheck checkLibraryPlan(const plan::ChunkPlan& plan, bool verify);

// The Plan a library entry runs for `count` elements: instantiate(), and for in-place-only
// allreduce / allgather plans the form that runs on the output buffer (see above). With
// `pieceBytes` > 0 the plan is cut into pieces whose messages hold at most that many bytes
// (where its messages are larger); `shape` tells how.
plan::Plan instantiateLibraryPlan(const plan::ChunkPlan& plan, uint64_t count, uint32_t elemSize,
                                  const std::string& algorithm = "", uint64_t pieceBytes = 0,
                                  plan::PieceShape* shape = nullptr);
// Whether instantiateLibraryPlan runs `plan` on the output buffer.
bool runsOnOutput(const plan::ChunkPlan& plan);

// The library of MSCCL XML files in the colon-separated directories of MSCCL_ALGO_DIR and
// WEFT_PLAN_DIR (*.xml, by name; Tuning::planDirs as `tuning` gives them),
// then the plans added with addProcessPlan(). Each file is read and verified once per process
// (again when its size or modification time changes); INFO logs which files were loaded and
// which were rejected and why. A bad file or directory is reported and skipped, never fatal.
std::shared_ptr<const PlanLibrary> libraryFromEnvironment(const Tuning& tuning);

// Same for an explicit directory list (colon-separated).
std::shared_ptr<const PlanLibrary> libraryFromDirectories(const std::string& dirs);

// Plans added in code (a synthesizer's, with its predicted cost) join the library of every
// communicator created afterwards, after the files. Checked like PlanLibrary::add (throws).
void addProcessPlan(plan::ChunkPlan plan, std::string source, double predictedUs = 0);
// Forgets the plans added with addProcessPlan (tests, tools that synthesize again).
void clearProcessPlans();

}  // namespace weft::select

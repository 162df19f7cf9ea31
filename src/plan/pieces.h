// Cutting a Plan into pieces the way MSCCL's runtime slices a program: MSCCL runs the whole
// program once per slice of every chunk, so each message is one slice however large the call.
// Weft's executor runs a step over its whole range instead, which a plan that sends a whole
// message before receiving its peer's (MSCCL's allpairs) cannot survive once a message outgrows
// the FIFO. cutIntoPieces() rewrites such a plan into one whose messages all fit a limit and
// that computes the same thing.
//
// Every step range of a Plan built from chunks is a run of whole "units" (the greatest common
// divisor of all offsets and counts the steps use, and of the spec's count, so that buffers
// aliased in place share unit boundaries). Each unit is cut into K near-equal parts. Piece k of a
// step covers part k of every unit in its range: one sub-step per unit, since part k of two
// adjacent units is not contiguous. Each lane runs all its steps for piece 0, then all for
// piece 1, and so on; a dependency on (lane d, step s) in piece k points to the last sub-step
// of piece k of that step. Piece k of any step touches only part k of units, so the pieces are
// K independent runs of the program, each on messages of at most one part of a unit, and both
// ends of a message cut the same count the same way, so messages still match in order.
//
// With K = 1 (a unit already fits the limit, steps do not) messages are split into runs of
// whole units instead. Channels, shares, send channels and push hints stay as they are.
#pragma once
#include <cstdint>

#include "src/plan/plan.h"

namespace weft::plan {

struct PieceOptions {
  uint64_t maxMessageElems = 0;  // the largest message the result may hold (> 0)
  // Part boundaries inside a unit fall on multiples of this many elements where the limit
  // allows (vector-friendly copies); the last part of a unit takes what is left.
  uint64_t alignElems = 1;
};

struct PieceShape {
  uint64_t pieces = 1;     // K; 1 also when the plan is left as it is
  uint64_t unitElems = 0;  // 0 when the plan is left as it is
};

// The largest count of any step that sends or receives.
uint64_t largestMessage(const Plan& plan);

// How cutIntoPieces() cuts `plan`: {1, 0} when every message already fits.
PieceShape pieceShape(const Plan& plan, const PieceOptions& options);

// The plan cut into pieces whose messages all hold at most options.maxMessageElems elements
// (`plan` itself when they already do). Throws weft::Error(kInvalidArgument) for a zero limit.
Plan cutIntoPieces(const Plan& plan, const PieceOptions& options, PieceShape* shape = nullptr);

}  // namespace weft::plan

#include "src/plan/pieces.h"

#include <algorithm>
#include <numeric>

#include "src/common/error.h"

namespace weft::plan {

namespace {

bool moves(const Step& s) { return opSends(s.op) || opRecvs(s.op); }

// The greatest common divisor of the spec's count and of every offset and count the steps use.
uint64_t unitOf(const Plan& plan) {
  uint64_t g = plan.spec.count;
  for (const Program& prog : plan.programs)
    for (const Lane& lane : prog.lanes)
      for (const Step& s : lane.steps) {
        if (s.count == 0) continue;
        g = std::gcd(g, s.count);
        if (opReadsSrc(s.op)) g = std::gcd(g, s.src.offset);
        if (opWritesDst(s.op)) g = std::gcd(g, s.dst.offset);
      }
  return g;
}

// Where the parts of a unit begin and end: part k is [bound(k), bound(k + 1)).
class Parts {
 public:
  Parts(uint64_t unit, uint64_t align, uint64_t pieces)
      : unit_(unit), align_(align), groups_((unit + align - 1) / align), pieces_(pieces) {}
  uint64_t bound(uint64_t k) const {
    const auto group = static_cast<unsigned __int128>(groups_) * k / pieces_;
    return std::min<uint64_t>(unit_, static_cast<uint64_t>(group) * align_);
  }

 private:
  uint64_t unit_, align_, groups_, pieces_;
};

// Sub-steps one piece of `s` becomes.
uint64_t subSteps(const Step& s, const PieceShape& shape, uint64_t maxMessage) {
  if (s.count == 0) return 1;
  if (shape.pieces > 1) return s.count / shape.unitElems;
  if (!moves(s) || s.count <= maxMessage) return 1;
  const uint64_t run = maxMessage / shape.unitElems * shape.unitElems;
  return (s.count + run - 1) / run;
}

}  // namespace

uint64_t largestMessage(const Plan& plan) {
  uint64_t most = 0;
  for (const Program& prog : plan.programs)
    for (const Lane& lane : prog.lanes)
      for (const Step& s : lane.steps)
        if (moves(s)) most = std::max(most, s.count);
  return most;
}

PieceShape pieceShape(const Plan& plan, const PieceOptions& options) {
  const uint64_t limit = options.maxMessageElems;
  if (limit == 0) fail(Status::kInvalidArgument, "pieces: the message limit is 0 elements");
  if (largestMessage(plan) <= limit) return {};
  PieceShape shape;
  shape.unitElems = unitOf(plan);
  const uint64_t align = std::clamp<uint64_t>(options.alignElems, 1, limit);
  const uint64_t groups = (shape.unitElems + align - 1) / align;
  const uint64_t groupsPerPart = limit / align;
  shape.pieces = (groups + groupsPerPart - 1) / groupsPerPart;
  return shape;
}

Plan cutIntoPieces(const Plan& plan, const PieceOptions& options, PieceShape* shapeOut) {
  const PieceShape shape = pieceShape(plan, options);
  if (shapeOut) *shapeOut = shape;
  if (shape.unitElems == 0) return plan;
  const uint64_t limit = options.maxMessageElems;
  const uint64_t K = shape.pieces, unit = shape.unitElems;
  const Parts parts(unit, std::clamp<uint64_t>(options.alignElems, 1, limit), K);
  const uint64_t run = limit / unit * unit;  // whole units per message when K == 1

  Plan out;
  out.algorithm = plan.algorithm;
  out.spec = plan.spec;
  out.inPlaceSafe = plan.inPlaceSafe;
  out.outOfPlaceSafe = plan.outOfPlaceSafe;
  out.pieces = plan.pieces * K;
  out.programs.resize(plan.programs.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const Program& in = plan.programs[r];
    Program& prog = out.programs[r];
    prog.scratchElems = in.scratchElems;
    prog.extraElems = in.extraElems;
    // first[l][s]: index of step s's first sub-step in piece 0 of lane l; perPiece[l]: sub-steps
    // of one piece of lane l. Piece k of step s starts at k * perPiece[l] + first[l][s].
    std::vector<std::vector<uint64_t>> first(in.lanes.size());
    std::vector<uint64_t> perPiece(in.lanes.size(), 0);
    for (size_t l = 0; l < in.lanes.size(); ++l)
      for (const Step& s : in.lanes[l].steps) {
        first[l].push_back(perPiece[l]);
        perPiece[l] += subSteps(s, shape, limit);
      }
    auto lastOf = [&](const StepRef& d, uint64_t k) {
      const uint64_t subs = subSteps(in.lanes[d.lane].steps[d.step], shape, limit);
      return StepRef{d.lane,
                     static_cast<int32_t>(k * perPiece[d.lane] + first[d.lane][d.step] + subs - 1)};
    };
    prog.lanes.resize(in.lanes.size());
    for (size_t l = 0; l < in.lanes.size(); ++l) {
      const Lane& src = in.lanes[l];
      Lane& lane = prog.lanes[l];
      lane.channel = src.channel;
      lane.share = src.share;
      lane.sendChannel = src.sendChannel;
      lane.push = src.push;
      if (perPiece[l] * K > static_cast<uint64_t>(INT32_MAX))
        fail(Status::kInvalidArgument, "pieces: lane " + std::to_string(l) + " of rank " +
                                           std::to_string(r) + " would hold more than 2^31 steps");
      lane.steps.reserve(perPiece[l] * K);
      for (uint64_t k = 0; k < K; ++k)
        for (const Step& s : src.steps) {
          const uint64_t subs = subSteps(s, shape, limit);
          for (uint64_t j = 0; j < subs; ++j) {
            Step piece = s;
            piece.deps.clear();
            if (j == 0)
              for (const StepRef& d : s.deps) piece.deps.push_back(lastOf(d, k));
            uint64_t shift = 0;
            if (s.count == 0) {
              // A step without elements (nop, empty message) recurs once per piece.
            } else if (K > 1) {
              shift = j * unit + parts.bound(k);
              piece.count = parts.bound(k + 1) - parts.bound(k);
            } else if (subs > 1) {
              shift = j * run;
              piece.count = std::min(run, s.count - shift);
            }
            if (opReadsSrc(s.op)) piece.src.offset += shift;
            if (opWritesDst(s.op)) piece.dst.offset += shift;
            lane.steps.push_back(std::move(piece));
          }
        }
    }
  }
  return out;
}

}  // namespace weft::plan

// The process grid of a parallel training run: world = dp x tp x pp ranks, tensor parallel
// innermost (neighbouring ranks, the fastest links), then data parallel, then pipeline stages
// outermost, as Megatron-LM lays them out:
//
//   world_rank = (pp_rank * dp + dp_rank) * tp + tp_rank
//
// Each axis gets its own communicator, split from the world one with ncclCommSplit, so a run
// of any shape (1x1x1 up to dp x tp x pp) uses the same code. Ranks may be processes (the world
// communicator from weftCommInitFromEnv) or threads of one process (a test's ncclCommInitAll).
#pragma once

#include <string>
#include <type_traits>

#include "nccl.h"

namespace weft::trainers {

struct GridShape {
  int dp = 1, tp = 1, pp = 1;
  int size() const { return dp * tp * pp; }
};

// Coordinates of a world rank in a shape.
struct GridCoords {
  int dp_rank = 0, tp_rank = 0, pp_rank = 0;
};
GridCoords grid_coords(const GridShape& shape, int world_rank);
int grid_world_rank(const GridShape& shape, const GridCoords& at);

class Grid {
 public:
  // Splits `world` (not owned; its size must be shape.size()) into the three axes' communicators.
  // Every rank of `world` must call this with the same shape. Throws std::runtime_error naming
  // the failing call and NCCL's error text.
  Grid(ncclComm_t world, const GridShape& shape);
  ~Grid();
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;

  const GridShape& shape() const { return shape_; }
  const GridCoords& coords() const { return at_; }
  int world_rank() const { return world_rank_; }
  ncclComm_t world() const { return world_; }
  ncclComm_t dp() const { return dp_; }  // ranks of the same tp_rank and pp_rank
  ncclComm_t tp() const { return tp_; }  // ranks of the same dp_rank and pp_rank
  ncclComm_t pp() const { return pp_; }  // ranks of the same dp_rank and tp_rank
  // "dp 1/2 tp 0/2 pp 1/2", for messages.
  std::string describe() const;

 private:
  GridShape shape_;
  GridCoords at_;
  int world_rank_ = 0;
  ncclComm_t world_ = nullptr;
  ncclComm_t dp_ = nullptr, tp_ = nullptr, pp_ = nullptr;
};

// Throws std::runtime_error("<what>: <NCCL error string>: <last error>") unless r is ncclSuccess.
void check_nccl(ncclResult_t r, const char* what, ncclComm_t comm = nullptr);

// The communicator's size and this rank's place in it; errors as check_nccl's, `who` (e.g.
// "grid", "dp") first.
int comm_size(ncclComm_t comm, const char* who);
int comm_rank(ncclComm_t comm, const char* who);

// NCCL's type for the trainers' scalars.
template <typename T>
ncclDataType_t nccl_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, float> ? ncclFloat32 : ncclFloat64;
}

}  // namespace weft::trainers

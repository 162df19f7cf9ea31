#include "trainers/parallel/grid.h"

#include <stdexcept>

namespace weft::trainers {

void check_nccl(ncclResult_t r, const char* what, ncclComm_t comm) {
  if (r == ncclSuccess) return;
  throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r) + ": " +
                           ncclGetLastError(comm));
}

int comm_size(ncclComm_t comm, const char* who) {
  int size = 0;
  check_nccl(ncclCommCount(comm, &size), (std::string(who) + ": ncclCommCount").c_str(), comm);
  return size;
}

int comm_rank(ncclComm_t comm, const char* who) {
  int rank = 0;
  check_nccl(ncclCommUserRank(comm, &rank), (std::string(who) + ": ncclCommUserRank").c_str(),
             comm);
  return rank;
}

GridCoords grid_coords(const GridShape& shape, int world_rank) {
  GridCoords at;
  at.tp_rank = world_rank % shape.tp;
  at.dp_rank = (world_rank / shape.tp) % shape.dp;
  at.pp_rank = world_rank / (shape.tp * shape.dp);
  return at;
}

int grid_world_rank(const GridShape& shape, const GridCoords& at) {
  return (at.pp_rank * shape.dp + at.dp_rank) * shape.tp + at.tp_rank;
}

Grid::Grid(ncclComm_t world, const GridShape& shape) : shape_(shape), world_(world) {
  if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1)
    throw std::runtime_error("grid: every axis needs at least one rank");
  const int size = comm_size(world, "grid");
  world_rank_ = comm_rank(world, "grid");
  if (size != shape.size())
    throw std::runtime_error("grid: dp " + std::to_string(shape.dp) + " x tp " +
                             std::to_string(shape.tp) + " x pp " + std::to_string(shape.pp) +
                             " needs " + std::to_string(shape.size()) + " ranks, the world has " +
                             std::to_string(size));
  at_ = grid_coords(shape, world_rank_);
  // Each axis: one color per position on the other two axes, keyed by the rank on this one.
  const int dp_color = at_.pp_rank * shape.tp + at_.tp_rank;
  const int tp_color = at_.pp_rank * shape.dp + at_.dp_rank;
  const int pp_color = at_.dp_rank * shape.tp + at_.tp_rank;
  check_nccl(ncclCommSplit(world, dp_color, at_.dp_rank, &dp_, nullptr), "grid: split dp", world);
  check_nccl(ncclCommSplit(world, tp_color, at_.tp_rank, &tp_, nullptr), "grid: split tp", world);
  check_nccl(ncclCommSplit(world, pp_color, at_.pp_rank, &pp_, nullptr), "grid: split pp", world);
}

Grid::~Grid() {
  for (ncclComm_t c : {dp_, tp_, pp_})
    if (c) ncclCommDestroy(c);
}

std::string Grid::describe() const {
  return "dp " + std::to_string(at_.dp_rank) + "/" + std::to_string(shape_.dp) + " tp " +
         std::to_string(at_.tp_rank) + "/" + std::to_string(shape_.tp) + " pp " +
         std::to_string(at_.pp_rank) + "/" + std::to_string(shape_.pp);
}

}  // namespace weft::trainers

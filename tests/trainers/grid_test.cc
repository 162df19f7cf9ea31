// The process grid: coordinates round-trip, and each axis's communicator holds exactly the
// ranks that share the other two coordinates, in the order of its own.
#include "trainers/parallel/grid.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "nccl.h"

namespace weft::trainers {
namespace {

TEST(TrainersGrid, CoordinatesRoundTripTensorParallelInnermost) {
  const GridShape shape{3, 2, 4};
  for (int r = 0; r < shape.size(); ++r)
    EXPECT_EQ(grid_world_rank(shape, grid_coords(shape, r)), r);
  const GridCoords at = grid_coords(shape, 1);
  EXPECT_EQ(at.tp_rank, 1);
  EXPECT_EQ(at.dp_rank, 0);
  EXPECT_EQ(grid_coords(shape, 6).pp_rank, 1);
}

// Sum over an axis of the world ranks: what the axis's members are.
int axis_sum(ncclComm_t comm, int world_rank) {
  int in = world_rank, out = -1;
  check_nccl(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comm, nullptr), "allreduce", comm);
  return out;
}

TEST(TrainersGrid, AxesHoldTheRanksSharingTheOtherCoordinates) {
  const GridShape shape{2, 2, 2};
  std::vector<ncclComm_t> world(shape.size());
  ASSERT_EQ(ncclCommInitAll(world.data(), shape.size(), nullptr), ncclSuccess);
  std::vector<std::thread> threads;
  std::vector<int> failures(shape.size(), 0);
  for (int r = 0; r < shape.size(); ++r)
    threads.emplace_back([&, r] {
      Grid grid(world[r], shape);
      const GridCoords at = grid.coords();
      int rank = -1, size = -1;
      ncclCommUserRank(grid.tp(), &rank);
      ncclCommCount(grid.tp(), &size);
      failures[r] += rank != at.tp_rank || size != shape.tp;
      ncclCommUserRank(grid.dp(), &rank);
      failures[r] += rank != at.dp_rank;
      ncclCommUserRank(grid.pp(), &rank);
      failures[r] += rank != at.pp_rank;
      // Expected sums: vary one coordinate, keep the others.
      int tp_sum = 0, dp_sum = 0, pp_sum = 0;
      for (int i = 0; i < 2; ++i) {
        tp_sum += grid_world_rank(shape, {at.dp_rank, i, at.pp_rank});
        dp_sum += grid_world_rank(shape, {i, at.tp_rank, at.pp_rank});
        pp_sum += grid_world_rank(shape, {at.dp_rank, at.tp_rank, i});
      }
      failures[r] += axis_sum(grid.tp(), r) != tp_sum;
      failures[r] += axis_sum(grid.dp(), r) != dp_sum;
      failures[r] += axis_sum(grid.pp(), r) != pp_sum;
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < shape.size(); ++r) EXPECT_EQ(failures[r], 0) << "rank " << r;
  for (ncclComm_t c : world) ncclCommDestroy(c);
}

TEST(TrainersGrid, ShapeOfAnotherSizeIsRefused) {
  ncclComm_t world = nullptr;
  ASSERT_EQ(ncclCommInitAll(&world, 1, nullptr), ncclSuccess);
  EXPECT_THROW(Grid(world, GridShape{2, 1, 1}), std::runtime_error);
  ncclCommDestroy(world);
}

}  // namespace
}  // namespace weft::trainers

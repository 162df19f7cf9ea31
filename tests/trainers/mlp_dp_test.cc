// The MLP under data parallelism (trainers/dp/mlp_step.h), ranks as threads of this process:
// 2 and 4 ranks against the single-process run over the same global batch for 10 AdamW steps,
// overlap off against on, and ZeRO-3 against plain DP.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/trainers/support/harness.h"
#include "trainers/common/adamw.h"
#include "trainers/common/mlp.h"
#include "trainers/common/rng.h"
#include "trainers/dp/data_parallel.h"
#include "trainers/dp/mlp_step.h"
#include "trainers/parallel/grid.h"

namespace weft::trainers {
namespace {

constexpr uint64_t kSeed = 77;
constexpr int kSteps = 10;
constexpr int kGlobalRows = 8;

MlpConfig tiny_mlp() {
  MlpConfig c;
  c.inputs = 20;
  c.hidden = {16, 12};
  c.classes = 4;
  return c;
}

AdamWConfig adamw_config() {
  AdamWConfig a;
  a.lr = 1e-2;
  a.clip_norm = 0.5;  // low enough that clipping takes effect on some steps
  return a;
}

// Global batch `step`: inputs in [0, 1) and labels from the stream (seed, step, row), so any
// rank can build its rows alone.
template <typename T>
void synthetic_rows(int step, int first_row, int rows, T* inputs, int32_t* labels) {
  const MlpConfig c = tiny_mlp();
  for (int r = 0; r < rows; ++r) {
    Rng rng(derive_seed(kSeed, static_cast<uint64_t>(step), static_cast<uint64_t>(first_row + r)));
    for (int i = 0; i < c.inputs; ++i) inputs[r * c.inputs + i] = static_cast<T>(rng.uniform());
    labels[r] = static_cast<int32_t>(rng.next() % c.classes);
  }
}

template <typename T>
struct RunResult {
  std::vector<T> params;
  std::vector<double> losses, norms;
  std::vector<int> layers_left;  // at each bucket's launch, last step
  size_t buckets = 0;
};

template <typename T>
RunResult<T> run_single() {
  const MlpConfig config = tiny_mlp();
  Mlp<T> model(config);
  model.initialize(kSeed);
  AdamW<T> optimizer(adamw_config(), model.table());
  std::vector<T> inputs(kGlobalRows * config.inputs);
  std::vector<int32_t> labels(kGlobalRows);
  RunResult<T> out;
  for (int step = 0; step < kSteps; ++step) {
    synthetic_rows(step, 0, kGlobalRows, inputs.data(), labels.data());
    model.zero_grads();
    out.losses.push_back(model.forward(inputs.data(), labels.data(), kGlobalRows));
    model.backward();
    out.norms.push_back(clip_and_step(model.params(), model.grads(), optimizer));
  }
  out.params = model.params();
  return out;
}

template <typename T>
std::vector<RunResult<T>> run_data_parallel(int ranks, const DataParallelConfig& dp_config) {
  const MlpConfig config = tiny_mlp();
  std::vector<RunResult<T>> results(ranks);
  run_grid_ranks(GridShape{ranks, 1, 1}, [&](Grid& grid) {
    RunResult<T>& result = results[grid.coords().dp_rank];
    Mlp<T> model(config);
    model.initialize(kSeed);
    DataParallel<T> dp(dp_config, adamw_config(), model.table(), model.params().data(),
                       model.grads().data(), grid.dp());
    MlpDataParallelStep<T> step_runner;
    const int rows = kGlobalRows / ranks, first = grid.coords().dp_rank * rows;
    std::vector<T> inputs(rows * config.inputs);
    std::vector<int32_t> labels(rows);
    for (int step = 0; step < kSteps; ++step) {
      synthetic_rows(step, first, rows, inputs.data(), labels.data());
      const double local =
          step_runner.forward_backward(model, dp, inputs.data(), labels.data(), rows, kGlobalRows);
      const DataParallelStep stats = dp.finish_step();
      result.losses.push_back(dp.sum_over_ranks(local) / kGlobalRows);
      result.norms.push_back(stats.grad_norm);
    }
    result.layers_left = dp.layers_left_at_launch();
    result.buckets = dp.layout().buckets().size();
    result.params.resize(model.table().total());
    dp.gather_params(result.params.data());
  });
  return results;
}

DataParallelConfig several_buckets() {
  DataParallelConfig dp;
  dp.bucket_bytes = 256;  // one layer per bucket
  return dp;
}

template <typename T>
void expect_matches_single(int ranks, double tolerance) {
  const RunResult<T> single = run_single<T>();
  const auto results = run_data_parallel<T>(ranks, several_buckets());
  for (int r = 0; r < ranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_EQ(results[r].params.size(), single.params.size());
    for (size_t i = 0; i < single.params.size(); ++i)
      ASSERT_NEAR(results[r].params[i], single.params[i], tolerance) << "element " << i;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(results[r].losses[s], single.losses[s], tolerance * single.losses[s]);
      EXPECT_NEAR(results[r].norms[s], single.norms[s], tolerance * single.norms[s]);
    }
    EXPECT_EQ(std::memcmp(results[r].params.data(), results[0].params.data(),
                          single.params.size() * sizeof(T)),
              0);
  }
  // Three layers, three buckets; the first two were reduced while backward still had layers
  // to run.
  ASSERT_EQ(results[0].buckets, 3u);
  ASSERT_EQ(results[0].layers_left.size(), 3u);
  EXPECT_GT(results[0].layers_left[0], 0);
  EXPECT_GT(results[0].layers_left[1], 0);
  EXPECT_LT(single.losses.back(), single.losses.front());
}

TEST(TrainersMlpDp, TwoRanksMatchOneProcessFloat) { expect_matches_single<float>(2, 1e-5); }
TEST(TrainersMlpDp, FourRanksMatchOneProcessFloat) { expect_matches_single<float>(4, 1e-5); }
TEST(TrainersMlpDp, TwoRanksMatchOneProcessDouble) { expect_matches_single<double>(2, 1e-12); }
TEST(TrainersMlpDp, FourRanksMatchOneProcessDouble) { expect_matches_single<double>(4, 1e-12); }

// Overlap only moves when the reductions are queued, never what they compute; ZeRO-3 gathers
// each layer before it runs and reduces the same way, so both are bitwise plain DP.
TEST(TrainersMlpDp, OverlapOffAndZero3BitwiseEqualPlainDp) {
  const auto reference = run_data_parallel<float>(4, several_buckets());
  DataParallelConfig no_overlap = several_buckets();
  no_overlap.overlap = false;
  DataParallelConfig zero3 = several_buckets();
  zero3.zero_stage = 3;
  for (const DataParallelConfig& config : {no_overlap, zero3}) {
    const auto results = run_data_parallel<float>(4, config);
    for (int r = 0; r < 4; ++r) {
      ASSERT_EQ(results[r].params.size(), reference[r].params.size());
      EXPECT_EQ(std::memcmp(results[r].params.data(), reference[r].params.data(),
                            reference[r].params.size() * sizeof(float)),
                0)
          << "rank " << r << " overlap " << config.overlap << " ZeRO-" << config.zero_stage;
      EXPECT_EQ(results[r].losses, reference[r].losses);
    }
    if (!config.overlap) {
      for (int left : results[0].layers_left) EXPECT_EQ(left, 0);
    }
  }
}

}  // namespace
}  // namespace weft::trainers

// DP x TP x PP composed (trainers/compose): 2x2x2 on 8 threads matches the one-process GPT after
// ten clipped AdamW steps from the same seed and global batch (1e-5 relative in float, 1e-12 in
// double), with sequence parallelism and ZeRO-1 too; ZeRO-1, -2 and -3 (with pipeline and tensor
// parallelism) and reducing after backward are bitwise plain DP; a pipeline alone stays bitwise
// the one process accumulating the same micro-batches; a checkpoint state gathered from one
// layout (ZeRO-1 or ZeRO-3) continues in another as the uninterrupted run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tests/trainers/support/harness.h"
#include "trainers/common/adamw.h"
#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/common/kernels.h"
#include "trainers/compose/gpt_grid.h"
#include "trainers/compose/grid_state.h"
#include "trainers/compose/grid_step.h"
#include "trainers/parallel/grid.h"

namespace weft::trainers {
namespace {

// 4 heads so that tp 2 splits them; vocabulary 30; two blocks for two stages.
GptConfig test_config() { return GptConfig{30, 8, 2, 4, 32}; }
constexpr int kBatch = 4, kSeq = 8, kSteps = 10;
constexpr uint64_t kSeed = 4321;

template <typename T>
struct Record {
  std::vector<double> losses, norms;
  std::vector<T> params;  // whole parameters after the last step
  // Per gradient bucket of the last step, in launch order: the layers still to run backward.
  std::vector<int> layers_left_at_launch;
};

// The one-process run: the whole batch at once through Gpt<T>.
template <typename T>
Record<T> run_single() {
  const auto text = repeating_text(test_config().vocab, 7);
  const TextBatcher batcher(&text, kSeq, kSeed);
  OneProcessRun<T> run = train_gpt_one_process<T>(test_config(), clipping_adamw(), kSeed, batcher,
                                                  kBatch, kSeq, kSteps);
  return Record<T>{std::move(run.losses), std::move(run.norms), std::move(run.params), {}};
}

struct Layout {
  GridShape shape;
  bool sequence_parallel = false;
  int zero = 0;
  int microbatches = 2;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  bool overlap = true;
  double bucket_mb = 0.004;  // a few layers per bucket: several buckets, some of many layers
};

// Runs steps [first, end) on a grid of threads; starts from `resume` (gathered whole state) when
// it has parameters. World rank 0's record; its whole state after the last step in `out`.
template <typename T>
Record<T> run_grid(const Layout& layout, int first, int end, const WholeState<T>& resume,
                   WholeState<T>* out = nullptr) {
  const auto text = repeating_text(test_config().vocab, 7);
  const TextBatcher batcher(&text, kSeq, kSeed);
  Record<T> record;
  run_grid_ranks(layout.shape, [&](Grid& grid) {
    const bool first_rank = grid.world_rank() == 0;
    GridGpt<T> model(test_config(), grid, layout.sequence_parallel);
    if (resume.params.empty()) model.initialize(kSeed);
    GridDataParallel dp;
    dp.zero_stage = layout.zero;
    dp.overlap = layout.overlap;
    dp.microbatches = layout.microbatches;
    dp.bucket_bytes = static_cast<size_t>(layout.bucket_mb * (1 << 20));
    GridTrainer<T> trainer(model.local(), grid, clipping_adamw(), dp);
    if (!resume.params.empty()) load_whole_state(resume, model.layout(), trainer);
    for (int step = first; step < end; ++step) {
      const GridStepStats s = trainer.step([&] {
        return model.forward_backward(batcher, step, kBatch, kSeq, layout.microbatches,
                                      layout.schedule);
      });
      if (first_rank) {
        record.losses.push_back(s.loss);
        record.norms.push_back(s.grad_norm);
      }
    }
    if (first_rank) record.layers_left_at_launch = trainer.data_parallel().layers_left_at_launch();
    WholeState<T> state = gather_whole_state(trainer, model.layout(), grid);
    if (first_rank) {
      record.params = state.params;
      if (out) *out = std::move(state);
    }
  });
  return record;
}

// Losses and norms step by step within tolerance (relative), and the parameters at the model's
// scale (AdamW divides by each element's running RMS, so where a gradient is mostly
// cancellation a different summation order moves that element by up to lr times the rounding).
template <typename T>
void expect_near(const Record<T>& got, const Record<T>& want, int first, double tolerance) {
  ASSERT_EQ(got.losses.size() + first, want.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want.losses[first + i], tolerance * want.losses[first + i])
        << "step " << first + i;
    EXPECT_NEAR(got.norms[i], want.norms[first + i], tolerance * want.norms[first + i])
        << "step " << first + i;
  }
  ASSERT_EQ(got.params.size(), want.params.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < want.params.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(want.params[i])));
    diff = std::max(diff, std::abs(static_cast<double>(got.params[i]) - want.params[i]));
  }
  EXPECT_LE(diff, tolerance * scale);
}

template <typename T>
void expect_bitwise(const Record<T>& got, const Record<T>& want) {
  EXPECT_EQ(got.losses, want.losses);
  EXPECT_EQ(got.norms, want.norms);
  EXPECT_TRUE(got.params == want.params);
}

TEST(Grid3dTest, TwoByTwoByTwoMatchesOneProcessFloat) {
  set_blas_threads(1);
  const Record<float> single = run_single<float>();
  bool clipped = false;
  for (double norm : single.norms) clipped |= norm > clipping_adamw().clip_norm;
  EXPECT_TRUE(clipped) << "the test means to exercise clipping";
  expect_near(run_grid<float>(Layout{{2, 2, 2}}, 0, kSteps, {}), single, 0, 1e-5);
}

TEST(Grid3dTest, TwoByTwoByTwoMatchesOneProcessDouble) {
  set_blas_threads(1);
  expect_near(run_grid<double>(Layout{{2, 2, 2}}, 0, kSteps, {}), run_single<double>(), 0, 1e-12);
}

TEST(Grid3dTest, SequenceParallelZeroOneGpipeMatchesOneProcess) {
  set_blas_threads(1);
  const Layout layout{{2, 2, 2}, true, 1, 2, PipelineSchedule::kGPipe};
  expect_near(run_grid<double>(layout, 0, kSteps, {}), run_single<double>(), 0, 1e-12);
  expect_near(run_grid<float>(layout, 0, kSteps, {}), run_single<float>(), 0, 1e-5);
}

TEST(Grid3dTest, ZeroStagesAndNoOverlapAreBitwisePlainDataParallelWithPipeline) {
  set_blas_threads(1);
  const Record<float> plain = run_grid<float>(Layout{{2, 1, 2}, false, 0}, 0, kSteps, {});
  for (int zero : {1, 2, 3})
    expect_bitwise(run_grid<float>(Layout{{2, 1, 2}, false, zero}, 0, kSteps, {}), plain);
  Layout after_backward{{2, 1, 2}, false, 0};
  after_backward.overlap = false;
  expect_bitwise(run_grid<float>(after_backward, 0, kSteps, {}), plain);
}

TEST(Grid3dTest, BucketsAreReducedDuringTheLastMicroBatchsBackward) {
  set_blas_threads(1);
  // Stage 0 of 2x1x2 holds the embeddings and one block: two buckets at this cap, the block's
  // queued while the embeddings' backward is still to run.
  const Record<float> overlapped = run_grid<float>(Layout{{2, 1, 2}, false, 2}, 0, 2, {});
  ASSERT_EQ(overlapped.layers_left_at_launch.size(), 2u);
  EXPECT_EQ(overlapped.layers_left_at_launch[0], 1);
  EXPECT_EQ(overlapped.layers_left_at_launch[1], 0);
  Layout after_backward{{2, 1, 2}, false, 2};
  after_backward.overlap = false;
  const Record<float> late = run_grid<float>(after_backward, 0, 2, {});
  EXPECT_EQ(late.layers_left_at_launch, (std::vector<int>{0, 0}));
}

TEST(Grid3dTest, ZeroStagesAreBitwisePlainDataParallelWithTensorParallel) {
  set_blas_threads(1);
  // Under sequence parallelism the buckets wait for the replicated gradients' fix-up.
  for (bool sp : {false, true}) {
    const Record<double> plain =
        run_grid<double>(Layout{{2, 2, 1}, sp, 0, 1, PipelineSchedule::kGPipe}, 0, kSteps, {});
    for (int zero : {2, 3})
      expect_bitwise(
          run_grid<double>(Layout{{2, 2, 1}, sp, zero, 1, PipelineSchedule::kGPipe}, 0, kSteps, {}),
          plain);
  }
}

TEST(Grid3dTest, ZeroThreeTwoByTwoByTwoMatchesOneProcess) {
  set_blas_threads(1);
  expect_near(run_grid<double>(Layout{{2, 2, 2}, false, 3}, 0, kSteps, {}), run_single<double>(), 0,
              1e-12);
}

TEST(Grid3dTest, PipelineAloneIsBitwiseTheAccumulatingProcess) {
  set_blas_threads(1);
  // One rank with four micro-batches accumulates them in order, as every stage does.
  const Layout one{{1, 1, 1}, false, 0, 4};
  const Record<double> accumulating = run_grid<double>(one, 0, kSteps, {});
  expect_bitwise(run_grid<double>(Layout{{1, 1, 2}, false, 0, 4}, 0, kSteps, {}), accumulating);
  expect_near(accumulating, run_single<double>(), 0, 1e-12);
}

TEST(Grid3dTest, StateGatheredFromOneLayoutContinuesInAnother) {
  set_blas_threads(1);
  const Record<double> single = run_single<double>();
  WholeState<double> state;
  run_grid<double>(Layout{{2, 2, 1}, false, 1}, 0, kSteps / 2, {}, &state);
  EXPECT_EQ(state.steps, kSteps / 2);
  for (const GridShape shape : {GridShape{1, 1, 2}, GridShape{2, 1, 1}, GridShape{1, 2, 2}})
    expect_near(run_grid<double>(Layout{shape}, kSteps / 2, kSteps, state), single, kSteps / 2,
                1e-12);
}

TEST(Grid3dTest, ZeroThreeStateContinuesInAnotherLayoutAndStage) {
  set_blas_threads(1);
  const Record<double> single = run_single<double>();
  WholeState<double> state;
  run_grid<double>(Layout{{2, 1, 2}, false, 3}, 0, kSteps / 2, {}, &state);
  EXPECT_EQ(state.steps, kSteps / 2);
  WholeState<double> plain_state;
  run_grid<double>(Layout{{2, 1, 2}, false, 0}, 0, kSteps / 2, {}, &plain_state);
  EXPECT_TRUE(state.params == plain_state.params && state.m == plain_state.m &&
              state.v == plain_state.v)
      << "ZeRO-3's gathered state is plain DP's";
  expect_near(run_grid<double>(Layout{{1, 2, 1}, false, 0, 1}, kSteps / 2, kSteps, state), single,
              kSteps / 2, 1e-12);
  expect_near(run_grid<double>(Layout{{2, 1, 1}, false, 2, 1}, kSteps / 2, kSteps, state), single,
              kSteps / 2, 1e-12);
}

}  // namespace
}  // namespace weft::trainers

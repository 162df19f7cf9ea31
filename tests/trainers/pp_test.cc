// Pipeline parallel: the GPipe and 1F1B schedules' order of operations, the layer split, and ten
// AdamW steps of 2 and 4 stages (ranks as threads of this process, grid dp = tp = 1) giving
// parameters and losses bitwise equal to one process accumulating the same micro-batches in the
// same order, in float and double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "tests/trainers/support/harness.h"
#include "tests/trainers/support/pipeline_trainer.h"
#include "trainers/common/adamw.h"
#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/common/rng.h"
#include "trainers/parallel/grid.h"
#include "trainers/pp/gpt_stage.h"
#include "trainers/pp/schedule.h"

namespace weft::trainers {
namespace {

constexpr int kSteps = 10;
constexpr int kBatch = 8;
constexpr int kSeq = 8;
constexpr uint64_t kSeed = 1234;

GptConfig test_config() { return GptConfig{13, kSeq, 4, 2, 16}; }

AdamWConfig test_adamw() {
  AdamWConfig c;
  c.lr = 3e-3;
  c.clip_norm = 0.5;  // low enough that some steps clip
  return c;
}

std::vector<int32_t> synthetic_tokens(int vocab) {
  Rng rng(99);
  std::vector<int32_t> tokens(2000);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(vocab));
  return tokens;
}

// The global batch of a step and its micro-batches of kBatch / micros rows each, in order.
struct StepBatch {
  std::vector<int32_t> tokens, targets;
  std::vector<MicroBatch> micros;
  StepBatch(const TextBatcher& batcher, int step, int micros_count)
      : tokens(kBatch * kSeq), targets(kBatch * kSeq) {
    batcher.batch(step, 0, kBatch, tokens.data(), targets.data());
    const int rows = kBatch / micros_count;
    for (int i = 0; i < micros_count; ++i)
      micros.push_back(MicroBatch{tokens.data() + i * rows * kSeq, targets.data() + i * rows * kSeq,
                                  rows, kSeq, 1.0 / (kBatch * kSeq)});
  }
};

template <typename T>
struct RunResult {
  std::vector<T> params;
  std::vector<double> losses, norms;
};

// One process: every micro-batch forward and backward through all layers, the gradients
// accumulating in order, then clipping by the table-ordered norm and AdamW.
template <typename T>
RunResult<T> reference_run(int micros_count) {
  const GptConfig config = test_config();
  const std::vector<int32_t> tokens = synthetic_tokens(config.vocab);
  const TextBatcher batcher(&tokens, kSeq, kSeed);
  Gpt<T> model(config);
  model.initialize(kSeed);
  AdamW<T> adamw(test_adamw(), model.table());
  const int C = config.channels, L = config.layers;
  RunResult<T> result;
  for (int step = 0; step < kSteps; ++step) {
    const StepBatch batch(batcher, step, micros_count);
    model.zero_grads();
    double loss_sum = 0;
    for (const MicroBatch& mb : batch.micros) {
      const size_t n = static_cast<size_t>(mb.rows) * mb.seq * C;
      std::vector<T> x0(n);
      model.embed_forward(mb.tokens, mb.rows, mb.seq, x0.data());
      std::vector<GptBlockActivations<T>> acts(L);
      for (int l = 0; l < L; ++l)
        model.block_forward(l, l == 0 ? x0.data() : acts[l - 1].out.data(), mb.rows, mb.seq,
                            acts[l]);
      GptHeadActivations<T> head;
      loss_sum += model.head_forward(acts.back().out.data(), mb.targets, mb.rows, mb.seq, head);
      std::vector<T> dout(n, T(0)), dx;
      model.head_backward(acts.back().out.data(), head, mb.targets, static_cast<T>(mb.loss_scale),
                          dout.data(), mb.rows, mb.seq);
      GptBlockScratch<T> scratch;
      for (int l = L - 1; l >= 0; --l) {
        dx.assign(n, T(0));
        model.block_backward(l, l == 0 ? x0.data() : acts[l - 1].out.data(), acts[l], dout.data(),
                             dx.data(), mb.rows, mb.seq, scratch);
        std::swap(dx, dout);
      }
      model.embed_backward(mb.tokens, mb.rows, mb.seq, dout.data());
    }
    result.losses.push_back(loss_sum / micros_count);
    const double norm = std::sqrt(tensorwise_square_sum(model.table(), model.grads().data()));
    result.norms.push_back(norm);
    scale_grads(model.grads().data(), model.grads().size(),
                clip_coefficient(norm, test_adamw().clip_norm));
    adamw.step(model.params().data(), model.grads().data());
  }
  result.params = model.params();
  return result;
}

struct RankTrace {
  std::vector<PipelineOp> executed;
  int peak_in_flight = 0;
  double wait_seconds = 0, step_seconds = 0;
  std::vector<double> losses, norms;
};

// stages ranks as threads, each a GptStage of its layers; the parameters gathered by range.
template <typename T>
RunResult<T> pipeline_run(int stages, int micros_count, PipelineSchedule schedule,
                          std::vector<RankTrace>& traces) {
  const GptConfig config = test_config();
  const std::vector<int32_t> tokens = synthetic_tokens(config.vocab);
  const TextBatcher batcher(&tokens, kSeq, kSeed);
  RunResult<T> result;
  result.params.assign(gpt_tensor_table(config).total(), T(0));
  traces.assign(stages, RankTrace{});
  run_grid_ranks(GridShape{1, 1, stages}, [&](Grid& grid) {
    const int stage_index = grid.coords().pp_rank;
    RankTrace& trace = traces[stage_index];
    GptStage<T> stage(config, split_gpt_layers(config.layers, stages, stage_index));
    stage.initialize(kSeed);
    PipelineTrainer<T> trainer(stage, grid.pp(), schedule, test_adamw());
    for (int step = 0; step < kSteps; ++step) {
      const StepBatch batch(batcher, step, micros_count);
      const PipelineStepStats stats = trainer.step(batch.micros);
      trace.losses.push_back(stats.loss);
      trace.norms.push_back(stats.grad_norm);
      trace.peak_in_flight = std::max(trace.peak_in_flight, stats.peak_in_flight);
      trace.wait_seconds += stats.wait_seconds;
      trace.step_seconds += stats.step_seconds;
    }
    trace.executed = trainer.runner().executed();
    const auto [begin, end] = stage.range();
    std::copy(stage.params().begin() + begin, stage.params().begin() + end,
              result.params.begin() + begin);
  });
  result.losses = traces[0].losses;
  result.norms = traces[0].norms;
  return result;
}

struct Case {
  int stages, micros;
  PipelineSchedule schedule;
};

template <typename T>
void expect_pipeline_matches_reference(const Case& c) {
  SCOPED_TRACE(std::to_string(c.stages) + " stages, " + std::to_string(c.micros) +
               " micro-batches, " + pipeline_schedule_name(c.schedule));
  const RunResult<T> reference = reference_run<T>(c.micros);
  std::vector<RankTrace> traces;
  const RunResult<T> pipeline = pipeline_run<T>(c.stages, c.micros, c.schedule, traces);
  ASSERT_FALSE(::testing::Test::HasFailure()) << "a rank failed (reported above)";
  // Clipping must have been exercised for the norm's bitwise agreement to mean something.
  int clipped = 0;
  for (double norm : reference.norms) clipped += norm > test_adamw().clip_norm;
  EXPECT_GT(clipped, 0);
  for (int r = 0; r < c.stages; ++r) {
    // Every rank sees the same loss and norm as the single process, bit for bit.
    EXPECT_EQ(traces[r].losses, reference.losses) << "rank " << r;
    EXPECT_EQ(traces[r].norms, reference.norms) << "rank " << r;
    EXPECT_EQ(traces[r].executed, pipeline_ops(c.schedule, c.stages, r, c.micros));
    // GPipe holds every micro-batch; 1F1B at most the stage's distance to the end plus one.
    const int expected_peak =
        c.schedule == PipelineSchedule::kGPipe ? c.micros : std::min(c.stages - r, c.micros);
    EXPECT_EQ(traces[r].peak_in_flight, expected_peak) << "rank " << r;
    std::printf(
        "[pp] %s p=%d m=%d rank %d: bubble %.3f measured (waiting %.4f s of %.4f s), "
        "%.3f ideal (p-1)/(m+p-1)\n",
        pipeline_schedule_name(c.schedule), c.stages, c.micros, r,
        traces[r].wait_seconds / traces[r].step_seconds, traces[r].wait_seconds,
        traces[r].step_seconds, ideal_bubble_fraction(c.stages, c.micros));
  }
  ASSERT_EQ(pipeline.params.size(), reference.params.size());
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < reference.params.size(); ++i)
    if (pipeline.params[i] != reference.params[i] && mismatches++ == 0) first = i;
  EXPECT_EQ(mismatches, 0u) << "first at element " << first << ": " << pipeline.params[first]
                            << " vs " << reference.params[first];
  // The run trained: the parameters moved from their initial values.
  Gpt<T> initial(test_config());
  initial.initialize(kSeed);
  EXPECT_NE(initial.params(), reference.params);
}

TEST(TrainersPp, SplitGivesEveryStageContiguousLayersEmbeddingFirstHeadLast) {
  for (int blocks : {1, 2, 4, 5, 7})
    for (int stages = 1; stages <= blocks; ++stages) {
      int next = 0, min_blocks = blocks, max_blocks = 0;
      for (int s = 0; s < stages; ++s) {
        const StageLayers layers = split_gpt_layers(blocks, stages, s);
        EXPECT_EQ(layers.first, next) << blocks << " blocks, stage " << s << " of " << stages;
        const int own = std::min(layers.last, blocks) - std::max(layers.first, 1) + 1;
        min_blocks = std::min(min_blocks, own);
        max_blocks = std::max(max_blocks, own);
        next = layers.last + 1;
      }
      EXPECT_EQ(next, blocks + 2);
      EXPECT_GE(min_blocks, 1);
      EXPECT_LE(max_blocks - min_blocks, 1);
    }
  EXPECT_THROW(split_gpt_layers(2, 3, 0), std::invalid_argument);
}

// Each stage runs every micro-batch's forward before its backward, forwards and backwards in
// micro-batch order; GPipe holds all micro-batches at once, 1F1B at most p - s.
TEST(TrainersPp, SchedulesOrderOperations) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB})
    for (int p : {1, 2, 4})
      for (int m : {1, 3, 4, 8})
        for (int s = 0; s < p; ++s) {
          const std::vector<PipelineOp> ops = pipeline_ops(schedule, p, s, m);
          ASSERT_EQ(ops.size(), 2u * m);
          int forwards = 0, backwards = 0, peak = 0;
          for (const PipelineOp& op : ops) {
            if (op.kind == PipelineOp::kForward)
              EXPECT_EQ(op.micro, forwards++);
            else
              EXPECT_EQ(op.micro, backwards++);
            EXPECT_LE(backwards, forwards);
            peak = std::max(peak, forwards - backwards);
          }
          EXPECT_EQ(peak, schedule == PipelineSchedule::kGPipe ? m : std::min(p - s, m))
              << pipeline_schedule_name(schedule) << " p " << p << " m " << m << " s " << s;
        }
  // The last stage of 1F1B alternates from the start.
  const std::vector<PipelineOp> last = pipeline_ops(PipelineSchedule::kOneFOneB, 4, 3, 3);
  const std::vector<PipelineOp> alternating = {
      {PipelineOp::kForward, 0},  {PipelineOp::kBackward, 0}, {PipelineOp::kForward, 1},
      {PipelineOp::kBackward, 1}, {PipelineOp::kForward, 2},  {PipelineOp::kBackward, 2}};
  EXPECT_EQ(last, alternating);
  EXPECT_EQ(parse_pipeline_schedule("1f1b"), PipelineSchedule::kOneFOneB);
  EXPECT_THROW(parse_pipeline_schedule("zero-bubble"), std::invalid_argument);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(4, 8), 3.0 / 11.0);
}

// Every combination: 2 and 4 stages, GPipe and 1F1B, 4 and 8 micro-batches, float and double.
class TrainersPpRun
    : public ::testing::TestWithParam<std::tuple<int, PipelineSchedule, int, bool>> {};

TEST_P(TrainersPpRun, ParametersBitwiseEqualToAccumulatingOneProcess) {
  const auto [stages, schedule, micros, use_double] = GetParam();
  if (use_double)
    expect_pipeline_matches_reference<double>({stages, micros, schedule});
  else
    expect_pipeline_matches_reference<float>({stages, micros, schedule});
}

INSTANTIATE_TEST_SUITE_P(StagesScheduleMicroBatchesType, TrainersPpRun,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(PipelineSchedule::kGPipe,
                                                              PipelineSchedule::kOneFOneB),
                                            ::testing::Values(4, 8), ::testing::Bool()),
                         [](const auto& info) {
                           return "p" + std::to_string(std::get<0>(info.param)) + "_" +
                                  pipeline_schedule_name(std::get<1>(info.param)) + "_m" +
                                  std::to_string(std::get<2>(info.param)) +
                                  (std::get<3>(info.param) ? "_f64" : "_f32");
                         });

}  // namespace
}  // namespace weft::trainers

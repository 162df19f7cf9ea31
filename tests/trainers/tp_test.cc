// Tensor and sequence parallelism (trainers/tp): the shard layout covers every element once, and
// TP (2 and 4 ranks) and SP (2 and 4 ranks) runs of ten AdamW steps with gradient clipping match
// the one-process Gpt on the same seed and global batch (1e-5 relative in float, 1e-12 in double);
// checkpoints of a TP run are the one-process run's file. Ranks are threads of this process.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/trainers/support/harness.h"
#include "tests/trainers/support/tp_checkpoint.h"
#include "trainers/common/adamw.h"
#include "trainers/common/checkpoint.h"
#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/common/kernels.h"
#include "trainers/parallel/grid.h"
#include "trainers/tp/tp_gpt.h"
#include "trainers/tp/tp_layout.h"

namespace weft::trainers {
namespace {

// Vocabulary 30 so that 4 ranks get uneven vocabulary ranges; 4 heads of 8 channels.
GptConfig test_config() { return GptConfig{30, 8, 2, 4, 32}; }
constexpr int kBatch = 4, kSeq = 8, kSteps = 10;
constexpr uint64_t kSeed = 1234;

template <typename T>
struct RunRecord {
  std::vector<double> losses, norms;
  std::vector<T> first_grads;   // whole-model gradients of step 0, before clipping
  std::vector<T> params;        // whole-model parameters after the last step
  std::vector<T> shard_params;  // the rank's own shard buffer after the last step
};

template <typename T>
RunRecord<T> run_single() {
  const auto text = repeating_text(test_config().vocab, 99);
  const TextBatcher batcher(&text, kSeq, kSeed);
  OneProcessRun<T> run = train_gpt_one_process<T>(test_config(), clipping_adamw(), kSeed, batcher,
                                                  kBatch, kSeq, kSteps);
  return RunRecord<T>{std::move(run.losses),
                      std::move(run.norms),
                      std::move(run.first_grads),
                      std::move(run.params),
                      {}};
}

// Runs body(grid) on tp threads, each a rank of a dp 1 x tp x pp 1 grid.
void run_ranks(int tp, const std::function<void(Grid&)>& body) {
  run_grid_ranks(GridShape{1, tp, 1}, body);
}

template <typename T>
std::vector<RunRecord<T>> run_tensor_parallel(int tp, bool sequence_parallel) {
  const GptConfig config = test_config();
  const auto text = repeating_text(config.vocab, 99);
  TextBatcher batcher(&text, kSeq, kSeed);
  std::vector<RunRecord<T>> records(tp);
  run_ranks(tp, [&](Grid& grid) {
    TpGpt<T> model(config, grid.tp(), sequence_parallel);
    model.initialize(kSeed);
    AdamW<T> optimizer(clipping_adamw(), model.table());
    RunRecord<T>& record = records[grid.coords().tp_rank];
    std::vector<int32_t> inputs(kBatch * kSeq), targets(kBatch * kSeq);
    auto& g = model.grads();
    for (int step = 0; step < kSteps; ++step) {
      batcher.batch(step, 0, kBatch, inputs.data(), targets.data());
      model.zero_grads();
      record.losses.push_back(model.forward(inputs.data(), targets.data(), kBatch, kSeq));
      model.backward();
      model.reduce_replicated_grads();
      if (step == 0) {
        record.first_grads.resize(model.whole_table().total());
        model.gather_whole(g.data(), record.first_grads.data());
      }
      const double norm = std::sqrt(model.grad_square_sum());
      record.norms.push_back(norm);
      scale_grads(g.data(), g.size(), clip_coefficient(norm, optimizer.config().clip_norm));
      optimizer.step(model.params().data(), g.data());
    }
    record.params.resize(model.whole_table().total());
    model.gather_whole(model.params().data(), record.params.data());
    record.shard_params = model.params();
  });
  return records;
}

// Each tensor's largest difference within tolerance times a scale: the tensor's largest
// magnitude, or the whole model's when model_scale.
template <typename T>
void expect_tensors_near(const TensorTable& table, const std::vector<T>& got,
                         const std::vector<T>& want, double tolerance, bool model_scale,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double model_max = 0;
  for (T w : want) model_max = std::max(model_max, std::abs(static_cast<double>(w)));
  for (const TensorInfo& t : table.tensors()) {
    double scale = 0, diff = 0;
    for (size_t i = t.offset; i < t.offset + t.size; ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(want[i])));
      diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    }
    EXPECT_LE(diff, tolerance * (model_scale ? model_max : scale)) << what << " " << t.name;
  }
}

template <typename T>
void expect_matches_single_process(int tp, bool sequence_parallel, double tolerance) {
  set_blas_threads(1);
  const RunRecord<T> single = run_single<T>();
  const auto records = run_tensor_parallel<T>(tp, sequence_parallel);
  const TpLayout rank0(test_config(), tp, 0);
  bool clipped = false;
  for (int step = 0; step < kSteps; ++step) clipped |= single.norms[step] > 0.5;
  EXPECT_TRUE(clipped) << "the test means to exercise clipping";
  for (int r = 0; r < tp; ++r) {
    const RunRecord<T>& got = records[r];
    ASSERT_EQ(got.losses.size(), static_cast<size_t>(kSteps)) << "rank " << r;
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(got.losses[step], single.losses[step], tolerance * single.losses[step])
          << "rank " << r << " step " << step;
      EXPECT_NEAR(got.norms[step], single.norms[step], tolerance * single.norms[step])
          << "rank " << r << " step " << step;
      // Every rank computes the loss and the norm from the same reduced values.
      EXPECT_EQ(got.losses[step], records[0].losses[step]);
      EXPECT_EQ(got.norms[step], records[0].norms[step]);
    }
    expect_tensors_near(rank0.whole(), got.first_grads, single.first_grads, tolerance, false,
                        "rank " + std::to_string(r) + " step 0 gradient");
    // AdamW divides each gradient by its own running RMS, so where a gradient is mostly
    // cancellation the rounding of a different summation order moves that element by up to lr
    // times float's relative error: in float the parameters are compared at the model's scale,
    // in double (where that amplified rounding stays far below the tolerance) tensor by tensor.
    expect_tensors_near(rank0.whole(), got.params, single.params, tolerance,
                        sizeof(T) == sizeof(float), "rank " + std::to_string(r) + " parameters");
    // Replicated tensors got the same gradients on every rank, so they stayed bit-identical.
    const TpLayout layout(test_config(), tp, r);
    for (size_t i = 0; i < layout.maps().size(); ++i) {
      if (!layout.maps()[i].replicated) continue;
      const TensorInfo& t = layout.shards().tensors()[i];
      const size_t at0 = rank0.shards().find(t.name).offset;  // shard offsets differ by rank
      for (size_t k = 0; k < t.size; ++k)
        ASSERT_EQ(got.shard_params[t.offset + k], records[0].shard_params[at0 + k])
            << t.name << " rank " << r;
    }
  }
}

TEST(TrainersTpLayout, ShardsCoverEveryElementOnceAndRoundTrip) {
  for (const auto& [config, tp] : {std::pair{test_config(), 2}, std::pair{test_config(), 4},
                                   std::pair{GptConfig{7, 5, 1, 3, 12}, 3}}) {
    const TensorTable whole = gpt_tensor_table(config);
    std::vector<double> values(whole.total()), assembled(whole.total(), -1);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
    std::vector<int> writes(whole.total(), 0);
    size_t shard_total = 0;
    for (int r = 0; r < tp; ++r) {
      const TpLayout layout(config, tp, r);
      std::vector<double> shard(layout.shards().total());
      layout.extract(values.data(), shard.data());
      layout.place(shard.data(), assembled.data(), r == 0);
      // Count writes: place a shard of ones into zeros.
      std::vector<double> ones(shard.size(), 1.0), marks(whole.total(), 0.0);
      layout.place(ones.data(), marks.data(), r == 0);
      for (size_t i = 0; i < marks.size(); ++i) writes[i] += static_cast<int>(marks[i]);
      for (size_t i = 0; i < layout.maps().size(); ++i)
        if (!layout.maps()[i].replicated) shard_total += layout.shards().tensors()[i].size;
    }
    EXPECT_EQ(assembled, values) << "tp " << tp;
    for (size_t i = 0; i < writes.size(); ++i) ASSERT_EQ(writes[i], 1) << "element " << i;
    size_t replicated = 0;
    const TpLayout layout0(config, tp, 0);
    for (size_t i = 0; i < layout0.maps().size(); ++i)
      if (layout0.maps()[i].replicated) replicated += layout0.shards().tensors()[i].size;
    EXPECT_EQ(shard_total + replicated, whole.total());
  }
}

TEST(TrainersTpLayout, QkvShardHoldsTheRanksHeadsOfQueryKeyAndValue) {
  const GptConfig config = test_config();  // C 32, 4 heads of 8
  const TensorTable whole = gpt_tensor_table(config);
  std::vector<double> values(whole.total());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  const TpLayout layout(config, 2, 1);  // heads 2 and 3: channels [16, 32)
  std::vector<double> shard(layout.shards().total());
  layout.extract(values.data(), shard.data());
  const TensorInfo& w = whole.find("blocks.0.attn.qkv.weight");
  const TensorInfo& s = layout.shards().find("blocks.0.attn.qkv.weight");
  ASSERT_EQ(s.shape, (std::vector<int64_t>{48, 32}));
  const int C = 32;
  for (int part = 0; part < 3; ++part)  // q, k, v
    for (int row = 0; row < 16; ++row)
      EXPECT_EQ(shard[s.offset + (part * 16 + row) * C],
                values[w.offset + (part * C + 16 + row) * C]);
  const TensorInfo& p = layout.shards().find("blocks.0.attn.proj.weight");
  ASSERT_EQ(p.shape, (std::vector<int64_t>{32, 16}));
  const size_t proj = whole.find("blocks.0.attn.proj.weight").offset;
  EXPECT_EQ(shard[p.offset + 16 * 3 + 5], values[proj + 32 * 3 + 16 + 5]);
  EXPECT_EQ(TpLayout(config, 4, 3).shards().find("lm_head.weight").shape[0], 8);  // 22..29
  EXPECT_EQ(TpLayout(config, 4, 0).shards().find("wte.weight").shape[0], 7);      // 0..6
}

TEST(TrainersTp, TwoRanksMatchOneProcessFloat) {
  expect_matches_single_process<float>(2, false, 1e-5);
}
TEST(TrainersTp, TwoRanksMatchOneProcessDouble) {
  expect_matches_single_process<double>(2, false, 1e-12);
}
TEST(TrainersTp, FourRanksMatchOneProcessFloat) {
  expect_matches_single_process<float>(4, false, 1e-5);
}
TEST(TrainersTp, FourRanksMatchOneProcessDouble) {
  expect_matches_single_process<double>(4, false, 1e-12);
}
TEST(TrainersTp, SequenceParallelTwoRanksMatchOneProcessFloat) {
  expect_matches_single_process<float>(2, true, 1e-5);
}
TEST(TrainersTp, SequenceParallelTwoRanksMatchOneProcessDouble) {
  expect_matches_single_process<double>(2, true, 1e-12);
}
TEST(TrainersTp, SequenceParallelFourRanksMatchOneProcessDouble) {
  expect_matches_single_process<double>(4, true, 1e-12);
}

// The per-layer steps as a pipeline stage runs them: two micro-batches of two sequences, layer by
// layer with caller-owned activations, accumulate the whole batch's gradients.
TEST(TrainersTp, PerLayerMicroBatchesGiveTheWholeBatchsGradients) {
  set_blas_threads(1);
  const GptConfig config = test_config();
  const auto text = repeating_text(config.vocab, 99);
  TextBatcher batcher(&text, kSeq, kSeed);
  std::vector<int32_t> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  batcher.batch(0, 0, kBatch, inputs.data(), targets.data());
  Gpt<double> single(config);
  single.initialize(kSeed);
  single.zero_grads();
  const double loss = single.forward(inputs.data(), targets.data(), kBatch, kSeq);
  single.backward();
  const int tp = 2;
  std::vector<std::vector<double>> grads(tp);
  std::vector<double> losses(tp, 0.0);
  run_ranks(tp, [&](Grid& grid) {
    const int r = grid.coords().tp_rank;
    TpGpt<double> model(config, grid.tp(), true);
    model.initialize(kSeed);
    model.zero_grads();
    const int micro = 2, C = config.channels, L = config.layers;
    const size_t local = static_cast<size_t>(model.local_rows(micro, kSeq)) * C;
    const double scale = 1.0 / (kBatch * kSeq);
    for (int m = 0; m < kBatch / micro; ++m) {
      const int32_t* tok = inputs.data() + m * micro * kSeq;
      const int32_t* tgt = targets.data() + m * micro * kSeq;
      std::vector<double> x0(local), dx(local), dnext(local, 0.0);
      model.embed_forward(tok, micro, kSeq, x0.data());
      std::vector<TpGptBlockActivations<double>> blocks(L);
      for (int l = 0; l < L; ++l)
        model.block_forward(l, l == 0 ? x0.data() : blocks[l - 1].out.data(), micro, kSeq,
                            blocks[l]);
      TpGptHeadActivations<double> head;
      losses[r] +=
          model.head_forward(blocks[L - 1].out.data(), tgt, micro, kSeq, head) * micro / kBatch;
      TpGptScratch<double> scratch;
      model.head_backward(blocks[L - 1].out.data(), head, tgt, scale, dnext.data(), micro, kSeq,
                          scratch);
      for (int l = L - 1; l >= 0; --l) {
        std::fill(dx.begin(), dx.end(), 0.0);
        model.block_backward(l, l == 0 ? x0.data() : blocks[l - 1].out.data(), blocks[l],
                             dnext.data(), dx.data(), micro, kSeq, scratch);
        std::swap(dx, dnext);
      }
      model.embed_backward(tok, micro, kSeq, dnext.data());
    }
    model.reduce_replicated_grads();
    grads[r].resize(model.whole_table().total());
    model.gather_whole(model.grads().data(), grads[r].data());
  });
  for (int r = 0; r < tp; ++r) {
    EXPECT_NEAR(losses[r], loss, 1e-12 * loss);
    expect_tensors_near(single.table(), grads[r], single.grads(), 1e-12, false,
                        "rank " + std::to_string(r) + " gradient");
  }
}

void expect_same_file(const TensorFile& got, const TensorFile& want) {
  EXPECT_EQ(got.all_meta(), want.all_meta());
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (size_t i = 0; i < want.tensors().size(); ++i) {
    EXPECT_EQ(got.tensors()[i].name, want.tensors()[i].name);
    EXPECT_EQ(got.tensors()[i].shape, want.tensors()[i].shape);
    EXPECT_TRUE(got.tensors()[i].bytes == want.tensors()[i].bytes) << want.tensors()[i].name;
  }
}

TEST(TrainersTp, CheckpointsAreTheOneProcessFile) {
  set_blas_threads(1);
  const GptConfig config = test_config();
  const int tp = 4;
  // A one-process model after a few steps (non-trivial moments and step count).
  Gpt<double> single(config);
  single.initialize(kSeed);
  AdamW<double> single_optimizer(clipping_adamw(), single.table());
  const TensorFile initial = make_checkpoint(single, single_optimizer, kSeed);
  const auto text = repeating_text(config.vocab, 99);
  TextBatcher batcher(&text, kSeq, kSeed);
  std::vector<int32_t> inputs(kBatch * kSeq), targets(kBatch * kSeq);
  for (int step = 0; step < 3; ++step) {
    batcher.batch(step, 0, kBatch, inputs.data(), targets.data());
    single.zero_grads();
    single.forward(inputs.data(), targets.data(), kBatch, kSeq);
    single.backward();
    single_optimizer.step(single.params().data(), single.grads().data());
  }
  const TensorFile trained = make_checkpoint(single, single_optimizer, kSeed);

  std::vector<TensorFile> initial_files(tp), resumed_files(tp);
  run_ranks(tp, [&](Grid& grid) {
    const int r = grid.coords().tp_rank;
    TpGpt<double> model(config, grid.tp(), true);
    model.initialize(kSeed);
    AdamW<double> optimizer(clipping_adamw(), model.table());
    initial_files[r] = make_tp_checkpoint(model, optimizer, kSeed);
    TpGpt<double> resumed(config, grid.tp(), true);
    AdamW<double> resumed_optimizer(clipping_adamw(), resumed.table());
    if (restore_tp_checkpoint(trained, resumed, resumed_optimizer) != kSeed)
      throw std::runtime_error("restored another seed");
    resumed_files[r] = make_tp_checkpoint(resumed, resumed_optimizer, kSeed);
  });
  for (int r = 0; r < tp; ++r) {
    expect_same_file(initial_files[r], initial);
    expect_same_file(resumed_files[r], trained);
  }
}

}  // namespace
}  // namespace weft::trainers

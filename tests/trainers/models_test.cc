// Whole models: gradients by finite differences in double precision, the per-layer API against
// forward/backward, micro-batch accumulation, the tensor table and initialisation, and that
// training lowers the loss.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainers/common/adamw.h"
#include "trainers/common/gpt.h"
#include "trainers/common/mlp.h"
#include "trainers/common/rng.h"

namespace weft::trainers {
namespace {

GptConfig tiny_gpt() { return GptConfig{7, 5, 2, 2, 8}; }

std::vector<int32_t> random_tokens(size_t n, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.below(vocab));
  return t;
}

// Central differences of loss() in a few elements of every tensor (first, middle, last).
template <typename Model, typename LossFn>
void expect_model_gradients(Model& model, LossFn loss) {
  const double h = 1e-5;
  for (const TensorInfo& t : model.table().tensors()) {
    for (size_t i : {size_t{0}, t.size / 2, t.size - 1}) {
      double& p = model.params()[t.offset + i];
      const double saved = p;
      p = saved + h;
      const double plus = loss();
      p = saved - h;
      const double minus = loss();
      p = saved;
      const double numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(model.grads()[t.offset + i], numeric, 1e-7 * std::max(1.0, std::abs(numeric)))
          << t.name << "[" << i << "]";
    }
  }
}

TEST(TrainersGpt, GradientsMatchFiniteDifferences) {
  Gpt<double> model(tiny_gpt());
  model.initialize(3);
  // Larger weights than GPT-2's init so that every path carries a visible gradient (but not so
  // large that the softmaxes saturate and the differences lose their accuracy).
  for (double& p : model.params()) p *= 3;
  const int B = 2, T = 5;
  const auto tokens = random_tokens(B * T, 7, 1), targets = random_tokens(B * T, 7, 2);
  model.zero_grads();
  model.forward(tokens.data(), targets.data(), B, T);
  model.backward();
  expect_model_gradients(model, [&] { return model.forward(tokens.data(), targets.data(), B, T); });
}

TEST(TrainersGpt, PerLayerStepsAndMicroBatchesGiveTheWholeModelsGradients) {
  const GptConfig config = tiny_gpt();
  Gpt<double> whole(config), staged(config);
  whole.initialize(5);
  staged.initialize(5);
  const int B = 4, T = 5, C = config.channels;
  const auto tokens = random_tokens(B * T, 7, 3), targets = random_tokens(B * T, 7, 4);
  whole.zero_grads();
  const double loss = whole.forward(tokens.data(), targets.data(), B, T);
  whole.backward();

  // Two micro-batches of two sequences, each run layer by layer as a pipeline would.
  staged.zero_grads();
  double staged_loss = 0;
  const int micro = 2, rows = micro * T;
  for (int m = 0; m < B / micro; ++m) {
    const int32_t* tok = tokens.data() + m * rows;
    const int32_t* tgt = targets.data() + m * rows;
    std::vector<double> x0(rows * C);
    staged.embed_forward(tok, micro, T, x0.data());
    std::vector<GptBlockActivations<double>> acts(config.layers);
    for (int l = 0; l < config.layers; ++l)
      staged.block_forward(l, l == 0 ? x0.data() : acts[l - 1].out.data(), micro, T, acts[l]);
    GptHeadActivations<double> head;
    staged_loss += staged.head_forward(acts.back().out.data(), tgt, micro, T, head) / 2;
    std::vector<double> dout(rows * C, 0), dx;
    staged.head_backward(acts.back().out.data(), head, tgt, 1.0 / (B * T), dout.data(), micro, T);
    GptBlockScratch<double> scratch;
    for (int l = config.layers - 1; l >= 0; --l) {
      dx.assign(rows * C, 0);
      staged.block_backward(l, l == 0 ? x0.data() : acts[l - 1].out.data(), acts[l], dout.data(),
                            dx.data(), micro, T, scratch);
      std::swap(dx, dout);
    }
    staged.embed_backward(tok, micro, T, dout.data());
  }
  EXPECT_NEAR(staged_loss, loss, 1e-13);
  for (size_t i = 0; i < whole.grads().size(); ++i)
    ASSERT_NEAR(staged.grads()[i], whole.grads()[i], 1e-13) << i;
}

TEST(TrainersGpt, TableIsContiguousByLayerInForwardOrder) {
  const GptConfig config{11, 8, 3, 2, 16};
  const TensorTable table = gpt_tensor_table(config);
  EXPECT_EQ(table.num_layers(), config.layers + 2);
  size_t offset = 0;
  for (const TensorInfo& t : table.tensors()) {
    EXPECT_EQ(t.offset, offset) << t.name;
    offset += t.size;
  }
  EXPECT_EQ(offset, table.total());
  size_t previous_end = 0;
  for (int layer = 0; layer < table.num_layers(); ++layer) {
    const auto [begin, end] = table.layer_range(layer);
    EXPECT_EQ(begin, previous_end);
    previous_end = end;
  }
  EXPECT_EQ(previous_end, table.total());
  // V*C + T*C + L*(12 C^2 + 13 C) + 2C + V*C.
  const size_t V = 11, T = 8, L = 3, C = 16;
  EXPECT_EQ(table.total(), V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + V * C);
  EXPECT_EQ(table.find("blocks.2.attn.qkv.weight").shape, (std::vector<int64_t>{48, 16}));
  EXPECT_TRUE(table.find("blocks.0.mlp.fc.weight").decay);
  EXPECT_FALSE(table.find("blocks.0.mlp.fc.bias").decay);
  EXPECT_FALSE(table.find("lnf.weight").decay);
  EXPECT_THROW(table.find("nope"), std::out_of_range);
}

TEST(TrainersGpt, InitialisationIsPerTensorAndTypeIndependent) {
  Gpt<double> two(GptConfig{7, 5, 2, 2, 8}), three(GptConfig{7, 5, 3, 2, 8});
  Gpt<float> two_float(GptConfig{7, 5, 2, 2, 8});
  two.initialize(42);
  three.initialize(42);
  two_float.initialize(42);
  const TensorInfo& a = two.table().find("blocks.1.attn.qkv.weight");
  const TensorInfo& b = three.table().find("blocks.1.attn.qkv.weight");
  for (size_t i = 0; i < a.size; ++i)
    ASSERT_EQ(two.params()[a.offset + i], three.params()[b.offset + i]);
  for (size_t i = 0; i < two.params().size(); ++i)
    ASSERT_EQ(two_float.params()[i], static_cast<float>(two.params()[i]));
  EXPECT_EQ(two.params()[two.table().find("blocks.0.ln1.weight").offset], 1.0);
  EXPECT_EQ(two.params()[two.table().find("blocks.0.ln1.bias").offset], 0.0);
  // Another seed, other weights.
  Gpt<double> other(GptConfig{7, 5, 2, 2, 8});
  other.initialize(43);
  EXPECT_NE(other.params()[a.offset], two.params()[a.offset]);
}

TEST(TrainersGpt, FloatAgreesWithDouble) {
  Gpt<double> d(tiny_gpt());
  Gpt<float> f(tiny_gpt());
  d.initialize(9);
  f.initialize(9);
  const auto tokens = random_tokens(10, 7, 5), targets = random_tokens(10, 7, 6);
  EXPECT_NEAR(f.forward(tokens.data(), targets.data(), 2, 5),
              d.forward(tokens.data(), targets.data(), 2, 5), 1e-5);
}

TEST(TrainersGpt, TrainingOnOneBatchLowersTheLoss) {
  Gpt<float> model(GptConfig{16, 8, 2, 2, 16});
  model.initialize(1);
  AdamWConfig config;
  config.lr = 1e-2;
  AdamW<float> optimizer(config, model.table());
  const auto tokens = random_tokens(32, 16, 7), targets = random_tokens(32, 16, 8);
  float first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    model.zero_grads();
    last = model.forward(tokens.data(), targets.data(), 4, 8);
    if (step == 0) first = last;
    model.backward();
    optimizer.step(model.params().data(), model.grads().data());
  }
  EXPECT_NEAR(first, std::log(16.0f), 0.1f);  // small init: close to uniform predictions
  EXPECT_LT(last, 0.5f * first);
}

TEST(TrainersMlp, GradientsMatchFiniteDifferencesAndTrainingLowersTheLoss) {
  Mlp<double> model(MlpConfig{6, {5, 4}, 3});
  model.initialize(2);
  // Nonzero biases: with zero ones a row whose units are all off puts the next layer exactly on
  // ReLU's kink, where finite differences and the derivative (taken as 0 there) differ.
  Rng noise(4);
  for (double& p : model.params()) p += 0.1 * noise.normal();
  const int rows = 5;
  Rng rng(3);
  std::vector<double> inputs(rows * 6);
  for (double& x : inputs) x = rng.normal();
  const std::vector<int32_t> labels = {0, 2, 1, 1, 0};
  model.zero_grads();
  model.forward(inputs.data(), labels.data(), rows);
  model.backward();
  expect_model_gradients(model, [&] { return model.forward(inputs.data(), labels.data(), rows); });

  AdamWConfig config;
  config.lr = 1e-2;
  AdamW<double> optimizer(config, model.table());
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    model.zero_grads();
    last = model.forward(inputs.data(), labels.data(), rows);
    if (step == 0) first = last;
    model.backward();
    optimizer.step(model.params().data(), model.grads().data());
  }
  EXPECT_LT(last, 0.2 * first);
  EXPECT_EQ(model.correct(), rows);
}

TEST(TrainersAdamW, ClippingScalesToTheNorm) {
  std::vector<double> g = {3, 4};
  const double norm = std::sqrt(grad_square_sum(g.data(), g.size()));
  EXPECT_DOUBLE_EQ(norm, 5.0);
  scale_grads(g.data(), g.size(), clip_coefficient(norm, 1.0));
  EXPECT_NEAR(std::sqrt(grad_square_sum(g.data(), g.size())), 1.0, 1e-6);
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(50, 0.0), 1.0);
}

TEST(TrainersAdamW, ShardedStepsEqualTheWholeStep) {
  const TensorTable table = gpt_tensor_table(tiny_gpt());
  std::vector<double> whole(table.total()), sharded, grads(table.total());
  initialize_tensors(table, 1, whole.data());
  Rng rng(2);
  for (double& g : grads) g = rng.normal();
  sharded = whole;
  AdamW<double> one({}, table);
  const size_t cut = table.total() / 3 + 1;  // inside a tensor
  AdamW<double> first({}, table, 0, cut), second({}, table, cut, table.total());
  for (int step = 0; step < 3; ++step) {
    one.step(whole.data(), grads.data());
    first.step(sharded.data(), grads.data());
    second.step(sharded.data(), grads.data());
  }
  EXPECT_EQ(whole, sharded);
}

}  // namespace
}  // namespace weft::trainers

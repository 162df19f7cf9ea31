// Tensor files and checkpoints: byte-identical round trips, resuming gives the same next losses,
// ranges (shards) load alone, and damaged or mismatched files are refused.
#include "trainers/common/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/trainers/support/scratch_files.h"
#include "trainers/common/adamw.h"
#include "trainers/common/gpt.h"
#include "trainers/common/mlp.h"
#include "trainers/common/rng.h"
#include "trainers/common/tensor_file.h"

namespace weft::trainers {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

const GptConfig kConfig{9, 6, 2, 2, 8};

std::vector<int32_t> tokens_for(int64_t step, uint64_t salt) {
  Rng rng(derive_seed(77, static_cast<uint64_t>(step), salt));
  std::vector<int32_t> t(12);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.below(kConfig.vocab));
  return t;
}

// Steps [optimizer.steps(), until) of training on step-seeded batches; returns their losses.
std::vector<float> train(Gpt<float>& model, AdamW<float>& optimizer, int64_t until) {
  std::vector<float> losses;
  for (int64_t step = optimizer.steps(); step < until; ++step) {
    const auto inputs = tokens_for(step, 1), targets = tokens_for(step, 2);
    model.zero_grads();
    losses.push_back(model.forward(inputs.data(), targets.data(), 2, 6));
    model.backward();
    auto& g = model.grads();
    scale_grads(g.data(), g.size(),
                clip_coefficient(std::sqrt(grad_square_sum(g.data(), g.size())), 0.5));
    optimizer.step(model.params().data(), g.data());
  }
  return losses;
}

TEST(TrainersTensorFile, RoundTripKeepsEveryTypeAndTheBytes) {
  ScratchFiles scratch;
  TensorFile file;
  file.set_meta("key", "value");
  const std::vector<float> f = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.5f};
  const std::vector<double> d = {0.1, 0.2};
  const std::vector<int32_t> i = {-1, 2, 3};
  const std::vector<int64_t> l = {int64_t{1} << 40};
  file.add("f", {2, 3}, f.data());
  file.add("d", {2}, d.data());
  file.add("i", {3}, i.data());
  file.add("l", {1}, l.data());
  EXPECT_THROW(file.add("f", {1}, f.data()), std::invalid_argument);
  const std::string path = scratch.path("round_trip.weft"),
                    again = scratch.path("round_trip2.weft");
  file.save(path);
  const TensorFile loaded = TensorFile::load(path);
  EXPECT_EQ(*loaded.meta("key"), "value");
  EXPECT_EQ(loaded.meta("missing"), nullptr);
  EXPECT_EQ(loaded.find("f").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(loaded.find("f").values<float>(), f);
  EXPECT_EQ(loaded.find("d").values<double>(), d);
  EXPECT_EQ(loaded.find("i").values<int32_t>(), i);
  EXPECT_EQ(loaded.find("l").values<int64_t>(), l);
  EXPECT_EQ(loaded.find("f").values<double>()[2], 3.25);  // converted on read
  loaded.save(again);
  EXPECT_EQ(file_bytes(path), file_bytes(again));
}

TEST(TrainersTensorFile, DamagedFilesAreRefused) {
  ScratchFiles scratch;
  TensorFile file;
  const std::vector<double> d(10, 1.0);
  file.add("d", {10}, d.data());
  const std::string path = scratch.path("damaged.weft");
  file.save(path);
  const std::string bytes = file_bytes(path);
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  EXPECT_THROW(TensorFile::load(path), std::runtime_error);
  std::ofstream(path, std::ios::binary) << bytes << "x";
  EXPECT_THROW(TensorFile::load(path), std::runtime_error);
  std::ofstream(path, std::ios::binary) << "NOTATENSORFILE";
  EXPECT_THROW(TensorFile::load(path), std::runtime_error);
  EXPECT_THROW(TensorFile::load(scratch.path("does_not_exist.weft")), std::runtime_error);
}

TEST(TrainersCheckpoint, SaveLoadSaveIsByteIdenticalAndResumingContinuesExactly) {
  ScratchFiles scratch;
  Gpt<float> model(kConfig);
  model.initialize(5);
  AdamW<float> optimizer({}, model.table());
  const std::vector<float> straight_first = train(model, optimizer, 3);
  const std::string path = scratch.path("gpt_checkpoint.weft");
  make_checkpoint(model, optimizer, 5).save(path);
  const std::vector<float> straight_rest = train(model, optimizer, 6);

  Gpt<float> fresh(kConfig);
  AdamW<float> fresh_optimizer({}, fresh.table());
  EXPECT_EQ(restore_checkpoint(TensorFile::load(path), fresh, fresh_optimizer), 5u);
  EXPECT_EQ(fresh_optimizer.steps(), 3);
  const std::string again = scratch.path("gpt_checkpoint_again.weft");
  make_checkpoint(fresh, fresh_optimizer, 5).save(again);
  EXPECT_EQ(file_bytes(path), file_bytes(again));
  const std::vector<float> resumed = train(fresh, fresh_optimizer, 6);
  EXPECT_EQ(resumed, straight_rest);  // bit for bit
  EXPECT_EQ(fresh.params(), model.params());
}

TEST(TrainersCheckpoint, TensorsAreStoredWholeByNameAndRangesLoadAlone) {
  Gpt<double> model(kConfig);
  model.initialize(8);
  AdamW<double> optimizer({}, model.table());
  const TensorFile file = make_checkpoint(model, optimizer, 8);
  const NamedTensor& qkv = file.find("param/blocks.1.attn.qkv.weight");
  EXPECT_EQ(qkv.shape, (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(qkv.dtype, DType::kFloat64);
  EXPECT_EQ(*file.meta("model"), "gpt");
  EXPECT_EQ(*file.meta("gpt.channels"), "8");
  // A shard that starts and ends inside tensors, as a ZeRO rank or a pipeline stage reads it.
  const size_t begin = model.table().total() / 4 + 3, end = model.table().total() / 2 + 5;
  std::vector<float> shard(model.table().total(), -1.0f);
  read_tensors(file, "param/", model.table(), shard.data(), begin, end);
  for (size_t i = 0; i < shard.size(); ++i) {
    if (i < begin || i >= end)
      ASSERT_EQ(shard[i], -1.0f) << i;
    else
      ASSERT_EQ(shard[i], static_cast<float>(model.params()[i])) << i;
  }
}

TEST(TrainersCheckpoint, OtherModelsAndConfigurationsAreRefused) {
  Gpt<float> model(kConfig);
  model.initialize(1);
  AdamW<float> optimizer({}, model.table());
  const TensorFile file = make_checkpoint(model, optimizer, 1);
  Gpt<float> wider(GptConfig{9, 6, 2, 2, 16});
  AdamW<float> wider_optimizer({}, wider.table());
  EXPECT_THROW(restore_checkpoint(file, wider, wider_optimizer), std::runtime_error);
  Mlp<float> mlp(MlpConfig{4, {3}, 2});
  AdamW<float> mlp_optimizer({}, mlp.table());
  EXPECT_THROW(restore_checkpoint(file, mlp, mlp_optimizer), std::runtime_error);

  // An MLP checkpoint in float loads into a double model (the values convert exactly).
  mlp.initialize(4);
  const TensorFile mlp_file = make_checkpoint(mlp, mlp_optimizer, 4);
  EXPECT_EQ(mlp_config_from(mlp_file).hidden, std::vector<int>{3});
  Mlp<double> mlp_double(MlpConfig{4, {3}, 2});
  AdamW<double> double_optimizer({}, mlp_double.table());
  restore_checkpoint(mlp_file, mlp_double, double_optimizer);
  for (size_t i = 0; i < mlp.params().size(); ++i)
    EXPECT_EQ(mlp_double.params()[i], static_cast<double>(mlp.params()[i]));
}

}  // namespace
}  // namespace weft::trainers

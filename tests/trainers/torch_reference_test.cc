// The GPT against PyTorch: trainers/reference/torch_reference.py builds the same model with
// torch.nn, loads the weights written here, runs the same batches and writes its logits, loss,
// gradients and the losses of ten AdamW steps with clipping; this test compares them with the C++
// model's. Skipped where Debian's python3-torch is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "trainers/common/adamw.h"
#include "trainers/common/checkpoint.h"
#include "trainers/common/gpt.h"
#include "trainers/common/rng.h"
#include "trainers/common/tensor_file.h"

namespace weft::trainers {
namespace {

bool torch_available() {
  const std::string command =
      std::string("timeout 120 ") + WEFT_TORCH_PYTHON + " -c 'import torch' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

std::string exact(double value) {
  std::ostringstream out;
  out << std::setprecision(17) << value;
  return out.str();
}

// The largest difference relative to the largest reference magnitude (per tensor).
double relative_difference(const std::vector<double>& ours, const std::vector<double>& reference) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    diff = std::max(diff, std::abs(ours[i] - reference[i]));
    scale = std::max(scale, std::abs(reference[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Tolerances {
  double logits, loss, grads_relative, step_losses, final_params;
};

template <typename T>
void compare_with_torch(const std::string& tag, const Tolerances& tol) {
  if (!torch_available())
    GTEST_SKIP() << WEFT_TORCH_PYTHON << " cannot import torch: apt-get install python3-torch";
  const GptConfig config{65, 16, 2, 2, 32};
  const int B = 4, steps = 10;
  AdamWConfig adamw;
  adamw.lr = 1e-2;
  adamw.beta2 = 0.95;
  adamw.weight_decay = 0.1;
  adamw.clip_norm = 0.5;

  Gpt<T> model(config);
  model.initialize(1234);
  std::vector<int32_t> inputs(steps * B * config.context), targets(inputs.size());
  Rng rng(99);
  for (int32_t& t : inputs) t = static_cast<int32_t>(rng.below(config.vocab));
  // A rule to learn (the next token is the input's successor), so ten steps lower the loss.
  for (size_t i = 0; i < inputs.size(); ++i) targets[i] = (inputs[i] + 1) % config.vocab;

  TensorFile setup;
  put_config(setup, config);
  setup.set_meta("dtype", dtype_name(dtype_of<T>()));
  setup.set_meta("adamw.lr", exact(adamw.lr));
  setup.set_meta("adamw.beta1", exact(adamw.beta1));
  setup.set_meta("adamw.beta2", exact(adamw.beta2));
  setup.set_meta("adamw.eps", exact(adamw.eps));
  setup.set_meta("adamw.weight_decay", exact(adamw.weight_decay));
  setup.set_meta("adamw.clip_norm", exact(adamw.clip_norm));
  std::string decayed;
  for (const TensorInfo& t : model.table().tensors())
    if (t.decay) decayed += (decayed.empty() ? "" : ",") + t.name;
  setup.set_meta("adamw.decay", decayed);
  write_tensors(setup, "param/", model.table(), model.params().data());
  const std::vector<int64_t> batch_shape = {steps, B, config.context};
  setup.add("input", batch_shape, inputs.data());
  setup.add("target", batch_shape, targets.data());
  // Per process, so that runs from several build trees on one machine do not share files.
  const std::string stem =
      testing::TempDir() + "/weft_trainers_" + std::to_string(getpid()) + "_torch_" + tag;
  const std::string setup_path = stem + "_setup.weft", result_path = stem + "_result.weft";
  setup.save(setup_path);
  std::remove(result_path.c_str());
  const std::string command = std::string("timeout 300 ") + WEFT_TORCH_PYTHON + " " +
                              WEFT_TORCH_REFERENCE_SCRIPT + " " + setup_path + " " + result_path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const TensorFile reference = TensorFile::load(result_path);
  std::remove(setup_path.c_str());
  std::remove(result_path.c_str());

  AdamW<T> optimizer(adamw, model.table());
  std::vector<double> losses;
  const size_t per_step = static_cast<size_t>(B) * config.context;
  int clipped_steps = 0;
  double worst_grad = 0, worst_loss = 0, worst_param = 0;
  for (int step = 0; step < steps; ++step) {
    model.zero_grads();
    const T loss = model.forward(inputs.data() + step * per_step, targets.data() + step * per_step,
                                 B, config.context);
    model.backward();
    losses.push_back(loss);
    if (step == 0) {
      const std::vector<double> logits(model.logits().begin(), model.logits().end());
      const std::vector<double> torch_logits = reference.find("logits").values<double>();
      ASSERT_EQ(logits.size(), torch_logits.size());
      double logit_diff = 0;
      for (size_t i = 0; i < logits.size(); ++i)
        logit_diff = std::max(logit_diff, std::abs(logits[i] - torch_logits[i]));
      EXPECT_LE(logit_diff, tol.logits);
      std::printf("%s: largest logit difference %.3g\n", tag.c_str(), logit_diff);
      EXPECT_NEAR(loss, reference.find("loss").values<double>()[0], tol.loss);
      for (const TensorInfo& t : model.table().tensors()) {
        const std::vector<double> ours(model.grads().begin() + t.offset,
                                       model.grads().begin() + t.offset + t.size);
        const NamedTensor& theirs = reference.find("grad/" + t.name);
        ASSERT_EQ(theirs.shape, t.shape) << t.name;
        const double difference = relative_difference(ours, theirs.values<double>());
        EXPECT_LE(difference, tol.grads_relative) << t.name;
        worst_grad = std::max(worst_grad, difference);
      }
    }
    auto& g = model.grads();
    const double norm = std::sqrt(grad_square_sum(g.data(), g.size()));
    const double coefficient = clip_coefficient(norm, adamw.clip_norm);
    if (coefficient < 1) ++clipped_steps;
    scale_grads(g.data(), g.size(), coefficient);
    optimizer.step(model.params().data(), g.data());
  }
  EXPECT_GT(clipped_steps, 0) << "the comparison should exercise clipping";
  const std::vector<double> torch_losses = reference.find("step_losses").values<double>();
  ASSERT_EQ(torch_losses.size(), losses.size());
  for (int step = 0; step < steps; ++step) {
    EXPECT_NEAR(losses[step], torch_losses[step], tol.step_losses) << "step " << step;
    worst_loss = std::max(worst_loss, std::abs(losses[step] - torch_losses[step]));
  }
  EXPECT_LT(losses.back(), losses.front());
  for (const TensorInfo& t : model.table().tensors()) {
    const std::vector<double> theirs = reference.find("final/" + t.name).values<double>();
    for (size_t i = 0; i < t.size; ++i) {
      ASSERT_NEAR(model.params()[t.offset + i], theirs[i], tol.final_params) << t.name << i;
      worst_param = std::max(worst_param, std::abs(model.params()[t.offset + i] - theirs[i]));
    }
  }
  std::printf(
      "%s: gradients %.3g (relative), step losses %.3g, final weights %.3g; "
      "loss %.4f -> %.4f, %d of %d steps clipped\n",
      tag.c_str(), worst_grad, worst_loss, worst_param, losses.front(), losses.back(),
      clipped_steps, steps);
}

TEST(TrainersTorchReference, Float32MatchesPyTorch) {
  compare_with_torch<float>("f32", {1e-5, 1e-5, 1e-4, 1e-4, 1e-3});
}

TEST(TrainersTorchReference, Float64MatchesPyTorch) {
  compare_with_torch<double>("f64", {1e-12, 1e-12, 1e-10, 1e-12, 1e-10});
}

}  // namespace
}  // namespace weft::trainers

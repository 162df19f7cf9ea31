// weft-train: the single-process reference trainer. Trains the GPT on the KJV text or the MLP on
// Fashion-MNIST, printing the loss of every step; writes and resumes checkpoints. The parallel
// trainers (data, tensor, pipeline) build on the same pieces in trainers/common.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainers/common/adamw.h"
#include "trainers/common/checkpoint.h"
#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/common/kernels.h"
#include "trainers/common/mlp.h"
#include "trainers/dp/train_dp.h"
#include "trainers/options.h"
#include "trainers/pp/pp_train.h"
#include "trainers/tp/tp_train.h"

namespace weft::trainers {
namespace {

AdamWConfig adamw_config(const TrainOptions& o) {
  AdamWConfig c;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  c.clip_norm = o.clip;
  return c;
}

void make_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + dir);
}

// The loop shared by both models. forward_backward(step) leaves the batch's gradients in
// model.grads() and returns its loss; evaluate() returns a validation loss.
template <typename T, typename Model, typename StepFn, typename EvalFn>
void train(const TrainOptions& o, Model& model, AdamW<T>& optimizer, uint64_t seed,
           StepFn forward_backward, EvalFn evaluate) {
  std::unique_ptr<std::ofstream> csv;
  if (!o.csv.empty()) {
    // A resumed run appends to the log of the run it continues.
    csv = std::make_unique<std::ofstream>(o.csv,
                                          optimizer.steps() > 0 ? std::ios::app : std::ios::trunc);
    if (!*csv) throw std::runtime_error("cannot write " + o.csv);
    if (csv->tellp() == 0) *csv << "step,loss,grad_norm,val_loss\n";
    *csv << std::setprecision(9);
  }
  std::vector<T>& params = model.params();
  std::vector<T>& grads = model.grads();
  for (int64_t step = optimizer.steps(); step < o.steps; ++step) {
    model.zero_grads();
    const T loss = forward_backward(step);
    const double norm = std::sqrt(grad_square_sum(grads.data(), grads.size()));
    scale_grads(grads.data(), grads.size(), clip_coefficient(norm, o.clip));
    optimizer.step(params.data(), grads.data());
    const bool last = step + 1 == o.steps;
    const bool eval = last || (o.eval_every > 0 && (step + 1) % o.eval_every == 0);
    std::printf("step %lld loss %.6f grad_norm %.4f", static_cast<long long>(step),
                static_cast<double>(loss), norm);
    const double val_loss = eval ? evaluate() : NAN;
    if (eval) std::printf(" val_loss %.6f", val_loss);
    std::printf("\n");
    std::fflush(stdout);
    if (csv) {
      *csv << step << ',' << static_cast<double>(loss) << ',' << norm << ',';
      if (eval) *csv << val_loss;
      *csv << '\n';
    }
  }
  if (!o.checkpoint_dir.empty()) {
    make_dir(o.checkpoint_dir);
    make_checkpoint(model, optimizer, seed).save(checkpoint_file(o.checkpoint_dir));
    std::printf("checkpoint %s (step %lld)\n", checkpoint_file(o.checkpoint_dir).c_str(),
                static_cast<long long>(optimizer.steps()));
  }
}

// Restores model and optimizer from --resume, or initialises the model; returns the seed in use.
template <typename T, typename Model>
uint64_t start(const TrainOptions& o, Model& model, AdamW<T>& optimizer) {
  if (o.resume_dir.empty()) {
    model.initialize(o.seed);
    return o.seed;
  }
  const uint64_t seed =
      restore_checkpoint(TensorFile::load(checkpoint_file(o.resume_dir)), model, optimizer);
  std::printf("resumed from %s at step %lld (seed %llu)\n", o.resume_dir.c_str(),
              static_cast<long long>(optimizer.steps()), static_cast<unsigned long long>(seed));
  return seed;
}

template <typename T>
void run_gpt(const TrainOptions& o) {
  const std::string text = load_kjv_text(o.text_cache);
  const CharVocab vocab(text);
  const TokenSplit split = split_tokens(vocab.encode(text), 0.1);
  GptConfig config{vocab.size(), o.seq, o.layers, o.heads, o.channels};
  Gpt<T> model(config);
  AdamW<T> optimizer(adamw_config(o), model.table());
  const uint64_t seed = start(o, model, optimizer);
  std::printf("gpt: %zu parameters, vocab %d, %zu training and %zu validation tokens\n",
              model.table().total(), vocab.size(), split.train.size(), split.validation.size());
  const TextBatcher train_batches(&split.train, o.seq, seed);
  const TextBatcher val_batches(&split.validation, o.seq, seed);
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  std::vector<int32_t> inputs(n), targets(n);
  auto forward_backward = [&](int64_t step) {
    train_batches.batch(step, 0, o.batch, inputs.data(), targets.data());
    const T loss = model.forward(inputs.data(), targets.data(), o.batch, o.seq);
    model.backward();
    return loss;
  };
  auto evaluate = [&]() {
    double sum = 0;
    for (int b = 0; b < o.eval_batches; ++b) {
      val_batches.batch(b, 0, o.batch, inputs.data(), targets.data());
      sum += model.forward(inputs.data(), targets.data(), o.batch, o.seq);
    }
    return sum / o.eval_batches;
  };
  train(o, model, optimizer, seed, forward_backward, evaluate);
}

template <typename T>
void run_mlp(const TrainOptions& o) {
  const std::string dir = o.fashion_dir.empty() ? kFashionMnistDir : o.fashion_dir;
  const ImageSet train_set = load_fashion_mnist(true, dir);
  const ImageSet test_set = load_fashion_mnist(false, dir);
  MlpConfig config{train_set.rows * train_set.cols, o.hidden, 10};
  Mlp<T> model(config);
  AdamW<T> optimizer(adamw_config(o), model.table());
  const uint64_t seed = start(o, model, optimizer);
  std::printf("mlp: %zu parameters, %d training and %d test images\n", model.table().total(),
              train_set.count, test_set.count);
  const ImageBatcher<T> train_batches(&train_set, seed);
  const ImageBatcher<T> test_images(&test_set, seed);
  std::vector<T> inputs(static_cast<size_t>(o.batch) * config.inputs);
  std::vector<int32_t> labels(o.batch);
  auto forward_backward = [&](int64_t step) {
    train_batches.batch(step, 0, o.batch, inputs.data(), labels.data());
    const T loss = model.forward(inputs.data(), labels.data(), o.batch);
    model.backward();
    return loss;
  };
  // The first 1000 test images: loss returned, accuracy printed.
  auto evaluate = [&]() {
    const int rows = 1000;
    std::vector<T> test_inputs(static_cast<size_t>(rows) * config.inputs);
    std::vector<int32_t> test_labels(rows);
    test_images.range(0, rows, test_inputs.data(), test_labels.data());
    const double loss = model.forward(test_inputs.data(), test_labels.data(), rows);
    std::printf(" test_accuracy %.3f", static_cast<double>(model.correct()) / rows);
    return loss;
  };
  train(o, model, optimizer, seed, forward_backward, evaluate);
}

}  // namespace
}  // namespace weft::trainers

int main(int argc, char** argv) {
  using namespace weft::trainers;
  try {
    bool help = false;
    const TrainOptions o = parse_options(argc, argv, help);
    if (help) {
      std::printf("%s", usage().c_str());
      return 0;
    }
    set_blas_threads(o.blas_threads);
    if (o.dp > 1 || o.zero > 0)
      run_gpt_data_parallel(o);
    else if (o.tp > 1 || o.sequence_parallel)
      run_tp_gpt(o);
    else if (o.pp > 1 || o.microbatches > 1)
      run_gpt_pipeline(o);
    else if (o.model == "gpt")
      o.dtype == "f64" ? run_gpt<double>(o) : run_gpt<float>(o);
    else
      o.dtype == "f64" ? run_mlp<double>(o) : run_mlp<float>(o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-train: %s\n", e.what());
    return 1;
  }
}

#include "trainers/tp/tp_train.h"

#include <sys/stat.h>

#include <cerrno>
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
#include "trainers/parallel/grid.h"
#include "trainers/tp/tp_checkpoint.h"
#include "trainers/tp/tp_gpt.h"
#include "weft/weft.h"

namespace weft::trainers {
namespace {

// Owns the world communicator of this process.
class WorldComm {
 public:
  WorldComm() { check_nccl(weftCommInitFromEnv(&comm_), "weftCommInitFromEnv"); }
  ~WorldComm() { ncclCommDestroy(comm_); }
  WorldComm(const WorldComm&) = delete;
  WorldComm& operator=(const WorldComm&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};

template <typename T>
void train(const TrainOptions& o, Grid& grid) {
  const bool leader = grid.world_rank() == 0;
  const std::string text = load_kjv_text(o.text_cache);
  const CharVocab vocab(text);
  const TokenSplit split = split_tokens(vocab.encode(text), 0.1);
  const GptConfig config{vocab.size(), o.seq, o.layers, o.heads, o.channels};
  TpGpt<T> model(config, grid.tp(), o.sequence_parallel);
  AdamWConfig adamw;
  adamw.lr = o.lr;
  adamw.weight_decay = o.weight_decay;
  adamw.clip_norm = o.clip;
  AdamW<T> optimizer(adamw, model.table());
  uint64_t seed = o.seed;
  if (o.resume_dir.empty())
    model.initialize(seed);
  else
    seed = restore_tp_checkpoint(TensorFile::load(checkpoint_file(o.resume_dir)), model, optimizer);
  if (leader)
    std::printf("gpt tp %d%s: %zu parameters (%zu on rank 0), vocab %d, from step %lld\n",
                model.tp(), o.sequence_parallel ? " sp" : "", model.whole_table().total(),
                model.table().total(), vocab.size(), static_cast<long long>(optimizer.steps()));
  std::unique_ptr<std::ofstream> csv;
  if (leader && !o.csv.empty()) {
    csv = std::make_unique<std::ofstream>(o.csv,
                                          optimizer.steps() > 0 ? std::ios::app : std::ios::trunc);
    if (!*csv) throw std::runtime_error("cannot write " + o.csv);
    if (csv->tellp() == 0) *csv << "step,loss,grad_norm,val_loss\n";
    *csv << std::setprecision(9);
  }
  const TextBatcher train_batches(&split.train, o.seq, seed);
  const TextBatcher val_batches(&split.validation, o.seq, seed);
  const size_t n = static_cast<size_t>(o.batch) * o.seq;
  std::vector<int32_t> inputs(n), targets(n);
  auto& grads = model.grads();
  for (int64_t step = optimizer.steps(); step < o.steps; ++step) {
    train_batches.batch(step, 0, o.batch, inputs.data(), targets.data());
    model.zero_grads();
    const T loss = model.forward(inputs.data(), targets.data(), o.batch, o.seq);
    model.backward();
    model.reduce_replicated_grads();
    const double norm = std::sqrt(model.grad_square_sum());
    scale_grads(grads.data(), grads.size(), clip_coefficient(norm, o.clip));
    optimizer.step(model.params().data(), grads.data());
    const bool eval = step + 1 == o.steps || (o.eval_every > 0 && (step + 1) % o.eval_every == 0);
    double val_loss = NAN;
    if (eval) {
      double sum = 0;
      for (int b = 0; b < o.eval_batches; ++b) {
        val_batches.batch(b, 0, o.batch, inputs.data(), targets.data());
        sum += model.forward(inputs.data(), targets.data(), o.batch, o.seq);
      }
      val_loss = sum / o.eval_batches;
    }
    if (!leader) continue;
    std::printf("step %lld loss %.6f grad_norm %.4f", static_cast<long long>(step),
                static_cast<double>(loss), norm);
    if (eval) std::printf(" val_loss %.6f", val_loss);
    std::printf("\n");
    std::fflush(stdout);
    if (csv) {
      *csv << step << ',' << static_cast<double>(loss) << ',' << norm << ',';
      if (eval) *csv << val_loss;
      *csv << '\n';
    }
  }
  if (o.checkpoint_dir.empty()) return;
  // Collective: every rank assembles the file; rank 0 writes it.
  const TensorFile file = make_tp_checkpoint(model, optimizer, seed);
  if (!leader) return;
  if (mkdir(o.checkpoint_dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + o.checkpoint_dir);
  file.save(checkpoint_file(o.checkpoint_dir));
  std::printf("checkpoint %s (step %lld)\n", checkpoint_file(o.checkpoint_dir).c_str(),
              static_cast<long long>(optimizer.steps()));
}

}  // namespace

void run_tp_gpt(const TrainOptions& o) {
  if (o.model != "gpt") throw std::invalid_argument("--tp and --sp train the gpt model");
  WorldComm world;
  Grid grid(world.get(), GridShape{1, o.tp, 1});
  if (o.dtype == "f64")
    train<double>(o, grid);
  else
    train<float>(o, grid);
}

}  // namespace weft::trainers

#include "trainers/compose/train_grid.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nccl.h"
#include "trainers/common/adamw.h"
#include "trainers/common/checkpoint.h"
#include "trainers/common/data.h"
#include "trainers/common/gpt.h"
#include "trainers/common/mlp.h"
#include "trainers/compose/gpt_grid.h"
#include "trainers/compose/grid_state.h"
#include "trainers/compose/grid_step.h"
#include "trainers/dp/mlp_step.h"
#include "trainers/parallel/grid.h"
#include "trainers/pp/schedule.h"
#include "weft/weft.h"

namespace weft::trainers {
namespace {

// A peer that dies mid-collective must not keep the others waiting long: Weft reports a dead
// peer as ncclRemoteError, and this bounds every other wait (unless the user set it).
constexpr const char* kDefaultTimeoutMs = "30000";

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

AdamWConfig adamw_config(const TrainOptions& o) {
  AdamWConfig c;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  c.clip_norm = o.clip;
  return c;
}

GridDataParallel dp_config(const TrainOptions& o) {
  GridDataParallel c;
  c.zero_stage = o.zero;
  c.bucket_bytes = static_cast<size_t>(o.bucket_mb * (1 << 20));
  c.overlap = o.overlap;
  c.microbatches = o.microbatches;
  return c;
}

// A validation: the mean loss, and for a classifier the accuracy (NaN otherwise).
struct Evaluation {
  double loss = NAN, accuracy = NAN;
};

bool under_launcher() {
  return std::getenv("WEFT_WORLD_SIZE") != nullptr || std::getenv("WORLD_SIZE") != nullptr;
}

// The world communicator: from the launcher's environment, or a one-rank one for a plain start.
ncclComm_t make_world(const GridShape& shape) {
  ncclComm_t world = nullptr;
  if (under_launcher()) {
    check_nccl(weftCommInitFromEnv(&world), "weftCommInitFromEnv");
  } else {
    if (shape.size() != 1)
      throw std::invalid_argument("--dp x --tp x --pp = " + std::to_string(shape.size()) +
                                  " ranks: start one process per rank (weftrun -n " +
                                  std::to_string(shape.size()) + ", mpirun or torchrun)");
    check_nccl(ncclCommInitAll(&world, 1, nullptr), "ncclCommInitAll");
  }
  return world;
}

// World rank 0's log: one line per step on stdout and, with --csv, one CSV row (a classifier's
// has a last column test_accuracy).
class StepLog {
 public:
  StepLog(const TrainOptions& o, bool leader, int64_t first_step, const char* unit, bool accuracy)
      : leader_(leader), unit_(unit), accuracy_(accuracy) {
    if (!leader || o.csv.empty()) return;
    // A resumed run appends to the log of the run it continues.
    csv_ = std::fopen(o.csv.c_str(), first_step > 0 ? "a" : "w");
    if (!csv_) throw std::runtime_error("cannot write " + o.csv);
    std::fseek(csv_, 0, SEEK_END);
    if (std::ftell(csv_) == 0)
      std::fprintf(csv_, "step,loss,val_loss,%s_per_s,comm_s,compute_s%s\n", unit,
                   accuracy ? ",test_accuracy" : "");
  }
  ~StepLog() {
    if (csv_) std::fclose(csv_);
  }
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;

  void record(int64_t step, const GridStepStats& s, double per_s, const Evaluation& e) {
    if (!leader_) return;
    std::printf("step %lld loss %.6f %s_per_s %.1f comm_s %.4f compute_s %.4f optimizer_s %.4f",
                static_cast<long long>(step), s.loss, unit_, per_s, s.comm_s, s.compute_s,
                s.optimizer_s);
    if (!std::isnan(e.loss)) std::printf(" val_loss %.6f", e.loss);
    if (!std::isnan(e.accuracy)) std::printf(" test_accuracy %.4f", e.accuracy);
    std::printf("\n");
    std::fflush(stdout);
    if (!csv_) return;
    // Losses with every digit, so that layouts compare exactly where they are exact.
    std::fprintf(csv_, "%lld,%.17g,", static_cast<long long>(step), s.loss);
    if (!std::isnan(e.loss)) std::fprintf(csv_, "%.17g", e.loss);
    std::fprintf(csv_, ",%.1f,%.6f,%.6f", per_s, s.comm_s, s.compute_s);
    if (accuracy_) std::fprintf(csv_, ",");
    if (accuracy_ && !std::isnan(e.accuracy)) std::fprintf(csv_, "%.6f", e.accuracy);
    std::fprintf(csv_, "\n");
    std::fflush(csv_);
  }

 private:
  bool leader_;
  const char* unit_;
  bool accuracy_;
  std::FILE* csv_ = nullptr;
};

// Reads DIR/checkpoint.weft into the whole model's state; returns its seed.
template <typename T, typename Model, typename Config>
uint64_t read_checkpoint(const TrainOptions& o, const Config& config, WholeState<T>& state) {
  Model whole(config);
  AdamW<T> optimizer(adamw_config(o), whole.table());
  const uint64_t seed =
      restore_checkpoint(TensorFile::load(checkpoint_file(o.resume_dir)), whole, optimizer);
  state.params = whole.params();
  state.m = optimizer.m();
  state.v = optimizer.v();
  state.steps = optimizer.steps();
  return seed;
}

// Gathers the whole state to world rank 0, which writes DIR/checkpoint.weft. Collective.
template <typename T, typename Model, typename Config>
void write_checkpoint(const TrainOptions& o, const Config& config, const GridTrainer<T>& trainer,
                      const WholeLayout<T>& layout, const Grid& grid, uint64_t seed) {
  WholeState<T> state = gather_whole_state(trainer, layout, grid);
  if (grid.world_rank() != 0) return;
  Model whole(config);
  whole.params() = std::move(state.params);
  AdamW<T> optimizer(trainer.adamw(), whole.table());
  optimizer.m() = std::move(state.m);
  optimizer.v() = std::move(state.v);
  optimizer.set_steps(state.steps);
  if (mkdir(o.checkpoint_dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + o.checkpoint_dir);
  make_checkpoint(whole, optimizer, seed).save(checkpoint_file(o.checkpoint_dir));
  std::printf("checkpoint %s (step %lld)\n", checkpoint_file(o.checkpoint_dir).c_str(),
              static_cast<long long>(state.steps));
  std::fflush(stdout);
}

// The loop every layout shares. pass(step) fills the rank's gradients; evaluate(model) runs on
// world rank 0 over the whole parameters.
template <typename T, typename Model, typename Config>
void train_loop(const TrainOptions& o, const Config& config, const Grid& grid,
                GridTrainer<T>& trainer, const WholeLayout<T>& layout, uint64_t seed,
                const std::function<LocalPass(int64_t)>& pass,
                const std::function<Evaluation(Model&)>& evaluate, double items_per_step,
                const char* unit, bool accuracy) {
  const bool leader = grid.world_rank() == 0;
  const int64_t first = trainer.steps();
  StepLog log(o, leader, first, unit, accuracy);
  std::unique_ptr<Model> eval_model;
  if (leader) eval_model = std::make_unique<Model>(config);
  int64_t checkpointed = -1;
  for (int64_t step = first; step < o.steps; ++step) {
    const double start = now_s();
    const GridStepStats stats = trainer.step([&] { return pass(step); });
    const double per_s = items_per_step / (now_s() - start);
    const bool eval = step + 1 == o.steps || (o.eval_every > 0 && (step + 1) % o.eval_every == 0);
    Evaluation e;
    if (eval) {
      std::vector<T> params = gather_whole_params(trainer, layout, grid);
      if (leader) {
        eval_model->params() = std::move(params);
        e = evaluate(*eval_model);
      }
    }
    log.record(step, stats, per_s, e);
    if (!o.checkpoint_dir.empty() && o.checkpoint_every > 0 &&
        (step + 1) % o.checkpoint_every == 0) {
      write_checkpoint<T, Model>(o, config, trainer, layout, grid, seed);
      checkpointed = step + 1;
    }
  }
  if (!o.checkpoint_dir.empty() && checkpointed != trainer.steps())
    write_checkpoint<T, Model>(o, config, trainer, layout, grid, seed);
  // Every rank's model states against the ZeRO paper's formulas (Psi: the rank's elements).
  const std::string memory = trainer.memory().describe();
  std::printf("rank %d (%s) memory: %s\n", grid.world_rank(), grid.describe().c_str(),
              memory.c_str());
  std::fflush(stdout);
}

template <typename T>
void train_gpt(const TrainOptions& o, const Grid& grid) {
  const std::string text = load_kjv_text(o.text_cache);
  const CharVocab vocab(text);
  const TokenSplit split = split_tokens(vocab.encode(text), 0.1);
  const GptConfig config{vocab.size(), o.seq, o.layers, o.heads, o.channels};
  if (o.batch % (o.dp * o.microbatches) != 0)
    throw std::invalid_argument("--batch must be a multiple of --dp x --microbatches");
  if (o.tp > 1 && o.sequence_parallel && (o.batch / o.dp / o.microbatches * o.seq) % o.tp != 0)
    throw std::invalid_argument("--sp: --tp must divide a micro-batch's rows x --seq");
  GridGpt<T> model(config, grid, o.sequence_parallel);
  uint64_t seed = o.seed;
  if (o.resume_dir.empty()) model.initialize(seed);
  GridTrainer<T> trainer(model.local(), grid, adamw_config(o), dp_config(o));
  if (!o.resume_dir.empty()) {
    WholeState<T> state;
    seed = read_checkpoint<T, Gpt<T>>(o, config, state);
    load_whole_state(state, model.layout(), trainer);
  }
  const PipelineSchedule schedule = parse_pipeline_schedule(o.schedule);
  if (grid.world_rank() == 0)
    std::printf(
        "gpt: %zu parameters, vocab %d, dp %d x tp %d%s x pp %d (%s, %d micro-batches), "
        "ZeRO-%d, overlap %s, from step %lld\n",
        model.whole_table().total(), vocab.size(), o.dp, o.tp, o.sequence_parallel ? " sp" : "",
        o.pp, pipeline_schedule_name(schedule), o.microbatches, o.zero,
        o.overlap && !o.sequence_parallel ? "on" : "off", static_cast<long long>(trainer.steps()));
  std::fflush(stdout);
  const TextBatcher train_batches(&split.train, o.seq, seed);
  auto pass = [&](int64_t step) {
    return model.forward_backward(train_batches, step, o.batch, o.seq, o.microbatches, schedule);
  };
  const TextBatcher val_batches(&split.validation, o.seq, seed);
  auto evaluate = [&](Gpt<T>& whole) {
    std::vector<int32_t> inputs(static_cast<size_t>(o.batch) * o.seq), targets(inputs.size());
    double sum = 0;
    for (int b = 0; b < o.eval_batches; ++b) {
      val_batches.batch(b, 0, o.batch, inputs.data(), targets.data());
      sum += whole.forward(inputs.data(), targets.data(), o.batch, o.seq);
    }
    return Evaluation{sum / o.eval_batches};
  };
  train_loop<T, Gpt<T>>(o, config, grid, trainer, model.layout(), seed, pass, evaluate,
                        static_cast<double>(o.batch) * o.seq, "tokens", false);
}

template <typename T>
void train_mlp(const TrainOptions& o, const Grid& grid) {
  if (o.tp > 1 || o.pp > 1 || o.microbatches > 1 || o.sequence_parallel)
    throw std::invalid_argument(
        "--model mlp trains data parallel only: --dp N, no --tp, --pp, --microbatches or --sp");
  if (o.batch % o.dp != 0) throw std::invalid_argument("--batch must be a multiple of --dp");
  const std::string dir = o.fashion_dir.empty() ? kFashionMnistDir : o.fashion_dir;
  const ImageSet train_set = load_fashion_mnist(true, dir);
  const ImageSet test_set = load_fashion_mnist(false, dir);
  const MlpConfig config{train_set.rows * train_set.cols, o.hidden, 10};
  Mlp<T> model(config);
  const TensorTable& table = model.table();
  const size_t total = table.total();
  WholeLayout<T> layout{&table, {}, {}};
  layout.place = [total](const T* local, T* whole) { std::copy(local, local + total, whole); };
  layout.extract = layout.place;
  if (o.resume_dir.empty()) model.initialize(o.seed);
  MlpDataParallelStep<T> runner;
  LocalModel<T> local{
      &table, model.params().data(), model.grads().data(), {0, total}, {0, table.tensors().size()}};
  GridTrainer<T> trainer(local, grid, adamw_config(o), dp_config(o));
  uint64_t seed = o.seed;
  if (!o.resume_dir.empty()) {
    WholeState<T> state;
    seed = read_checkpoint<T, Mlp<T>>(o, config, state);
    load_whole_state(state, layout, trainer);
  }
  if (grid.world_rank() == 0)
    std::printf("mlp: %zu parameters, dp %d, ZeRO-%d, overlap %s, from step %lld\n", total, o.dp,
                o.zero, o.overlap ? "on" : "off", static_cast<long long>(trainer.steps()));
  const int rows = o.batch / o.dp, dp_rank = grid.coords().dp_rank;
  const ImageBatcher<T> train_batches(&train_set, seed);
  std::vector<T> inputs(static_cast<size_t>(rows) * config.inputs);
  std::vector<int32_t> labels(rows);
  // Layer by layer with the data-parallel hooks; the gradients are scaled by the global batch,
  // so the ranks' sum to the global batch's mean-loss gradients.
  auto pass = [&](int64_t step) {
    train_batches.batch(step, dp_rank * rows, rows, inputs.data(), labels.data());
    const double loss_sum = runner.forward_backward(model, trainer.hooks(), inputs.data(),
                                                    labels.data(), rows, o.batch);
    return LocalPass{loss_sum / o.batch, 0.0};
  };
  // The whole test set, in chunks so that the activations stay small.
  const ImageBatcher<T> test_images(&test_set, seed);
  auto evaluate = [&](Mlp<T>& whole) {
    const int chunk = 1000;
    std::vector<T> x(static_cast<size_t>(chunk) * config.inputs);
    std::vector<int32_t> y(chunk);
    double loss_sum = 0;
    int correct = 0;
    for (int first = 0; first < test_set.count; first += chunk) {
      const int n = std::min(chunk, test_set.count - first);
      test_images.range(first, n, x.data(), y.data());
      loss_sum += static_cast<double>(whole.forward(x.data(), y.data(), n)) * n;
      correct += whole.correct();
    }
    return Evaluation{loss_sum / test_set.count, static_cast<double>(correct) / test_set.count};
  };
  train_loop<T, Mlp<T>>(o, config, grid, trainer, layout, seed, pass, evaluate, o.batch, "samples",
                        true);
}

}  // namespace

void run_grid_training(const TrainOptions& o) {
  setenv("WEFT_TIMEOUT_MS", kDefaultTimeoutMs, 0);
  const GridShape shape{o.dp, o.tp, o.pp};
  ncclComm_t world = nullptr;
  std::unique_ptr<Grid> grid;
  try {
    world = make_world(shape);
    grid = std::make_unique<Grid>(world, shape);
    const bool f64 = o.dtype == "f64";
    if (o.model == "gpt")
      f64 ? train_gpt<double>(o, *grid) : train_gpt<float>(o, *grid);
    else
      f64 ? train_mlp<double>(o, *grid) : train_mlp<float>(o, *grid);
  } catch (const std::exception& e) {
    const std::string where =
        grid ? " (rank " + std::to_string(grid->world_rank()) + ", " + grid->describe() + ")" : "";
    std::fprintf(stderr, "weft-train%s: %s\n", where.c_str(), e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    // Abort rather than destroy: the peers' pending calls on these communicators then fail
    // instead of waiting for this rank.
    if (grid)
      for (ncclComm_t c : {grid->dp(), grid->tp(), grid->pp()}) ncclCommAbort(c);
    if (world) ncclCommAbort(world);
    std::_Exit(1);
  }
  grid.reset();
  ncclCommDestroy(world);
}

}  // namespace weft::trainers

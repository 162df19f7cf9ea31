#include "tests/trainers/support/tp_checkpoint.h"

#include <stdexcept>

#include "trainers/common/checkpoint.h"
#include "trainers/common/gpt.h"

namespace weft::trainers {

namespace {

template <typename T>
void check_covers_shards(const TpGpt<T>& model, const AdamW<T>& optimizer) {
  if (optimizer.begin() != 0 || optimizer.end() != model.table().total())
    throw std::invalid_argument("tp checkpoint: the optimizer must cover the rank's shards");
}

}  // namespace

template <typename T>
TensorFile make_tp_checkpoint(const TpGpt<T>& model, const AdamW<T>& optimizer, uint64_t seed) {
  check_covers_shards(model, optimizer);
  // The one-process model and optimizer, filled with the assembled tensors, write the file, so
  // the bytes are those of a one-process checkpoint of the same values.
  Gpt<T> whole(model.config());
  AdamW<T> whole_optimizer(optimizer.config(), whole.table());
  model.gather_whole(model.params().data(), whole.params().data());
  model.gather_whole(optimizer.m().data(), whole_optimizer.m().data());
  model.gather_whole(optimizer.v().data(), whole_optimizer.v().data());
  whole_optimizer.set_steps(optimizer.steps());
  return make_checkpoint(whole, whole_optimizer, seed);
}

template <typename T>
uint64_t restore_tp_checkpoint(const TensorFile& file, TpGpt<T>& model, AdamW<T>& optimizer) {
  check_covers_shards(model, optimizer);
  Gpt<T> whole(model.config());
  AdamW<T> whole_optimizer(optimizer.config(), whole.table());
  const uint64_t seed = restore_checkpoint(file, whole, whole_optimizer);
  model.load_whole(whole.params().data());
  model.layout().extract(whole_optimizer.m().data(), optimizer.m().data());
  model.layout().extract(whole_optimizer.v().data(), optimizer.v().data());
  optimizer.set_steps(whole_optimizer.steps());
  return seed;
}

#define WEFT_TP_CHECKPOINT_TYPE(T)                                                       \
  template TensorFile make_tp_checkpoint<T>(const TpGpt<T>&, const AdamW<T>&, uint64_t); \
  template uint64_t restore_tp_checkpoint<T>(const TensorFile&, TpGpt<T>&, AdamW<T>&);
WEFT_TP_CHECKPOINT_TYPE(float)
WEFT_TP_CHECKPOINT_TYPE(double)

}  // namespace weft::trainers

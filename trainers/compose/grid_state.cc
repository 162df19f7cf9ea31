#include "trainers/compose/grid_state.h"

#include <algorithm>
#include <type_traits>

namespace weft::trainers {
namespace {

template <typename T>
ncclDataType_t nccl_type() {
  return std::is_same_v<T, double> ? ncclFloat64 : ncclFloat32;
}

// Sums every rank's contribution (its elements [lo, hi) of `local`, placed into the whole
// layout; nothing when !contributes) onto world rank 0.
template <typename T>
std::vector<T> reduce_whole(const WholeLayout<T>& layout, const Grid& grid, const T* local,
                            size_t local_total, size_t lo, size_t hi, bool contributes) {
  std::vector<T> masked(local_total, T(0)), whole(layout.whole->total(), T(0));
  if (contributes) std::copy(local + lo, local + hi, masked.begin() + lo);
  layout.place(masked.data(), whole.data());
  check_nccl(ncclReduce(whole.data(), whole.data(), whole.size(), nccl_type<T>(), ncclSum, 0,
                        grid.world(), nullptr),
             "gather of whole tensors", grid.world());
  return whole;
}

}  // namespace

template <typename T>
std::vector<T> gather_whole_params(const GridTrainer<T>& trainer, const WholeLayout<T>& layout,
                                   const Grid& grid) {
  const LocalModel<T>& m = trainer.model();
  return reduce_whole(layout, grid, m.params, m.table->total(), m.range.first, m.range.second,
                      grid.coords().dp_rank == 0);
}

template <typename T>
WholeState<T> gather_whole_state(const GridTrainer<T>& trainer, const WholeLayout<T>& layout,
                                 const Grid& grid) {
  WholeState<T> state;
  state.params = gather_whole_params(trainer, layout, grid);
  const AdamW<T>& opt = trainer.optimizer();
  const size_t total = trainer.model().table->total();
  const bool owner = trainer.zero_stage() == 1 || grid.coords().dp_rank == 0;
  // The moments in the local flat layout, so that they place like the parameters.
  std::vector<T> local(total, T(0));
  for (auto [moments, out] : {std::pair{&opt.m(), &state.m}, std::pair{&opt.v(), &state.v}}) {
    std::copy(moments->begin(), moments->end(), local.begin() + opt.begin());
    *out = reduce_whole(layout, grid, local.data(), total, opt.begin(), opt.end(), owner);
  }
  state.steps = opt.steps();
  return state;
}

template <typename T>
void load_whole_state(const WholeState<T>& state, const WholeLayout<T>& layout,
                      GridTrainer<T>& trainer) {
  const LocalModel<T>& m = trainer.model();
  std::vector<T> local(m.table->total());
  layout.extract(state.params.data(), m.params);
  AdamW<T>& opt = trainer.optimizer();
  for (auto [whole, moments] : {std::pair{&state.m, &opt.m()}, std::pair{&state.v, &opt.v()}}) {
    layout.extract(whole->data(), local.data());
    std::copy(local.begin() + opt.begin(), local.begin() + opt.end(), moments->begin());
  }
  opt.set_steps(state.steps);
}

#define WEFT_GRID_STATE_TYPE(T)                                                                \
  template std::vector<T> gather_whole_params<T>(const GridTrainer<T>&, const WholeLayout<T>&, \
                                                 const Grid&);                                 \
  template WholeState<T> gather_whole_state<T>(const GridTrainer<T>&, const WholeLayout<T>&,   \
                                               const Grid&);                                   \
  template void load_whole_state<T>(const WholeState<T>&, const WholeLayout<T>&, GridTrainer<T>&);
WEFT_GRID_STATE_TYPE(float)
WEFT_GRID_STATE_TYPE(double)

}  // namespace weft::trainers

#include "trainers/compose/grid_state.h"

#include <algorithm>

namespace weft::trainers {
namespace {

// Sums every rank's contribution (`local`, its local flat layout, zero where it contributes
// nothing) placed into the whole layout onto world rank 0.
template <typename T>
std::vector<T> reduce_whole(const WholeLayout<T>& layout, const Grid& grid, const T* local) {
  std::vector<T> whole(layout.whole->total(), T(0));
  layout.place(local, whole.data());
  check_nccl(ncclReduce(whole.data(), whole.data(), whole.size(), nccl_type<T>(), ncclSum, 0,
                        grid.world(), nullptr),
             "gather of whole tensors", grid.world());
  return whole;
}

}  // namespace

template <typename T>
std::vector<T> gather_whole_params(const GridTrainer<T>& trainer, const WholeLayout<T>& layout,
                                   const Grid& grid) {
  std::vector<T> local(trainer.model().table->total(), T(0));
  trainer.owned_params_to_flat(local.data());
  return reduce_whole(layout, grid, local.data());
}

template <typename T>
WholeState<T> gather_whole_state(const GridTrainer<T>& trainer, const WholeLayout<T>& layout,
                                 const Grid& grid) {
  const size_t total = trainer.model().table->total();
  std::vector<T> params(total, T(0)), m(total, T(0)), v(total, T(0));
  trainer.owned_state_to_flat(params.data(), m.data(), v.data());
  WholeState<T> state;
  state.params = reduce_whole(layout, grid, params.data());
  state.m = reduce_whole(layout, grid, m.data());
  state.v = reduce_whole(layout, grid, v.data());
  state.steps = trainer.steps();
  return state;
}

template <typename T>
void load_whole_state(const WholeState<T>& state, const WholeLayout<T>& layout,
                      GridTrainer<T>& trainer) {
  const LocalModel<T>& model = trainer.model();
  const size_t total = model.table->total();
  std::vector<T> m(total), v(total);
  layout.extract(state.params.data(), model.params);
  layout.extract(state.m.data(), m.data());
  layout.extract(state.v.data(), v.data());
  trainer.load_state(m.data(), v.data(), state.steps);
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

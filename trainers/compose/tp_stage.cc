#include "trainers/compose/tp_stage.h"

namespace weft::trainers {

template class ModelStage<TpGpt<float>>;
template class ModelStage<TpGpt<double>>;

}  // namespace weft::trainers

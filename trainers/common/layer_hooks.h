// Calls around every layer a rank runs (table layer numbers), in the order the model runs them:
//
//   before_forward(l)  layer l's forward  after_forward(l)      once per micro-batch
//   before_backward(l) layer l's backward after_backward(l)     once per micro-batch
//
// Data parallelism (trainers/dp/data_parallel.h) implements them: it queues a gradient bucket's
// reduction as soon as the last micro-batch's backward has finished the bucket's layers, so the
// reduction runs while earlier layers compute, and under ZeRO-3 gathers a layer's parameters just
// before it runs and frees them after. Pipeline stages (trainers/pp/stage.h) and the MLP's step
// (trainers/dp/mlp_step.h) call them.
#pragma once

namespace weft::trainers {

class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(int layer) = 0;
  virtual void after_forward(int layer) = 0;
  virtual void before_backward(int layer) = 0;
  virtual void after_backward(int layer) = 0;
};

}  // namespace weft::trainers

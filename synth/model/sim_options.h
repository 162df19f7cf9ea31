// The event simulator's settings (synth/model/simulator.h): its pipelining and FIFO model and the
// costs it adds to every step.
#pragma once
#include <cstdint>

namespace weft::synth {

struct SimOptions {
  uint64_t sliceBytes = 128 * 1024;  // pipelining unit (the executor's FIFO slot size)
  int fifoSlots = 8;                 // slots per (sender, receiver, channel) FIFO
  // Steps with more slices than this use proportionally larger slices (fewer events); the
  // pipeline fill this adds is under 1% while chains are shorter than maxSlicesPerStep / 100.
  uint64_t maxSlicesPerStep = 1024;
  double stepOverheadUs = 0;  // software cost of starting any step
  double localBw = 0;         // GB/s of copy / reduce steps; 0 = free
  // Lanes share a link in proportion to their plan::Lane::share (weighted max-min); false: every
  // transfer counts the same whatever its lane's share.
  bool laneShares = true;
};

}  // namespace weft::synth

// Checkpoints: parameters and AdamW state, stored whole by name so that any parallel layout
// writes the same file and loads any file (trainers/README.md, "Checkpoints").
//
// A checkpoint is a TensorFile with metadata "format" = "weft-checkpoint", "model" (gpt or mlp),
// the model's configuration ("gpt.*" or "mlp.*"), "dtype", "step" (AdamW steps taken, which is
// also the next training step), "seed", and the tensors "param/<name>", "adamw.m/<name>",
// "adamw.v/<name>" for every tensor of the model's table, in table order.
#pragma once

#include <cstdint>
#include <string>

#include "trainers/common/adamw.h"
#include "trainers/common/gpt.h"
#include "trainers/common/mlp.h"
#include "trainers/common/tensor_file.h"
#include "trainers/common/tensor_table.h"

namespace weft::trainers {

// The file inside a checkpoint directory.
std::string checkpoint_file(const std::string& dir);

void put_config(TensorFile& file, const GptConfig& config);
void put_config(TensorFile& file, const MlpConfig& config);
GptConfig gpt_config_from(const TensorFile& file);
MlpConfig mlp_config_from(const TensorFile& file);

// Adds "<prefix><name>" for each tensor of table, taken whole from the flat buffer.
template <typename T>
void write_tensors(TensorFile& file, const std::string& prefix, const TensorTable& table,
                   const T* flat);
// Fills elements [begin, end) of a flat buffer laid out by table from "<prefix><name>" tensors
// (converting the element type); checks each stored shape against the table.
template <typename T>
void read_tensors(const TensorFile& file, const std::string& prefix, const TensorTable& table,
                  T* flat, size_t begin, size_t end);

// The checkpoint of a whole model held in one process: the model's config and tensors, the
// optimizer (which must cover the whole buffer) and its step.
template <typename T, typename Model>
TensorFile make_checkpoint(const Model& model, const AdamW<T>& optimizer, uint64_t seed);
// Loads params and optimizer state from a checkpoint made by make_checkpoint for the same
// configuration (throws std::runtime_error on a different model or configuration); returns the
// seed it recorded.
template <typename T, typename Model>
uint64_t restore_checkpoint(const TensorFile& file, Model& model, AdamW<T>& optimizer);

}  // namespace weft::trainers

#include "trainers/common/checkpoint.h"

#include <sstream>
#include <stdexcept>

namespace weft::trainers {

namespace {

int meta_int(const TensorFile& file, const std::string& key) {
  return std::stoi(file.require_meta(key));
}

std::string join(const std::vector<int>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

std::vector<int> split_ints(const std::string& text) {
  std::vector<int> values;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) values.push_back(std::stoi(item));
  return values;
}

const char* model_name(const Gpt<float>*) { return "gpt"; }
const char* model_name(const Gpt<double>*) { return "gpt"; }
const char* model_name(const Mlp<float>*) { return "mlp"; }
const char* model_name(const Mlp<double>*) { return "mlp"; }

bool same_config(const GptConfig& a, const GptConfig& b) {
  return a.vocab == b.vocab && a.context == b.context && a.layers == b.layers &&
         a.heads == b.heads && a.channels == b.channels;
}
bool same_config(const MlpConfig& a, const MlpConfig& b) {
  return a.inputs == b.inputs && a.hidden == b.hidden && a.classes == b.classes;
}
GptConfig config_from(const TensorFile& file, const GptConfig*) { return gpt_config_from(file); }
MlpConfig config_from(const TensorFile& file, const MlpConfig*) { return mlp_config_from(file); }

}  // namespace

std::string checkpoint_file(const std::string& dir) { return dir + "/checkpoint.weft"; }

void put_config(TensorFile& file, const GptConfig& c) {
  file.set_meta("gpt.vocab", std::to_string(c.vocab));
  file.set_meta("gpt.context", std::to_string(c.context));
  file.set_meta("gpt.layers", std::to_string(c.layers));
  file.set_meta("gpt.heads", std::to_string(c.heads));
  file.set_meta("gpt.channels", std::to_string(c.channels));
}

void put_config(TensorFile& file, const MlpConfig& c) {
  file.set_meta("mlp.inputs", std::to_string(c.inputs));
  file.set_meta("mlp.hidden", join(c.hidden));
  file.set_meta("mlp.classes", std::to_string(c.classes));
}

GptConfig gpt_config_from(const TensorFile& file) {
  GptConfig c;
  c.vocab = meta_int(file, "gpt.vocab");
  c.context = meta_int(file, "gpt.context");
  c.layers = meta_int(file, "gpt.layers");
  c.heads = meta_int(file, "gpt.heads");
  c.channels = meta_int(file, "gpt.channels");
  return c;
}

MlpConfig mlp_config_from(const TensorFile& file) {
  MlpConfig c;
  c.inputs = meta_int(file, "mlp.inputs");
  c.hidden = split_ints(file.require_meta("mlp.hidden"));
  c.classes = meta_int(file, "mlp.classes");
  return c;
}

template <typename T>
void write_tensors(TensorFile& file, const std::string& prefix, const TensorTable& table,
                   const T* flat) {
  for (const TensorInfo& t : table.tensors()) file.add(prefix + t.name, t.shape, flat + t.offset);
}

template <typename T>
void read_tensors(const TensorFile& file, const std::string& prefix, const TensorTable& table,
                  T* flat, size_t begin, size_t end) {
  for (const TensorInfo& t : table.tensors()) {
    const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.size);
    if (lo >= hi) continue;
    const NamedTensor& stored = file.find(prefix + t.name);
    if (stored.shape != t.shape)
      throw std::runtime_error("tensor " + stored.name + " has another shape than the model's");
    stored.read(lo - t.offset, hi - lo, flat + lo);
  }
}

template <typename T, typename Model>
TensorFile make_checkpoint(const Model& model, const AdamW<T>& optimizer, uint64_t seed) {
  const TensorTable& table = model.table();
  if (optimizer.begin() != 0 || optimizer.end() != table.total())
    throw std::invalid_argument("make_checkpoint: the optimizer must cover the whole model");
  TensorFile file;
  file.set_meta("format", "weft-checkpoint");
  file.set_meta("model", model_name(&model));
  put_config(file, model.config());
  file.set_meta("dtype", dtype_name(dtype_of<T>()));
  file.set_meta("step", std::to_string(optimizer.steps()));
  file.set_meta("seed", std::to_string(seed));
  write_tensors(file, "param/", table, model.params().data());
  // m and v cover [0, total), so they are laid out as the table.
  write_tensors(file, "adamw.m/", table, optimizer.m().data());
  write_tensors(file, "adamw.v/", table, optimizer.v().data());
  return file;
}

template <typename T, typename Model>
uint64_t restore_checkpoint(const TensorFile& file, Model& model, AdamW<T>& optimizer) {
  if (file.require_meta("format") != "weft-checkpoint")
    throw std::runtime_error("not a weft checkpoint");
  if (file.require_meta("model") != model_name(&model))
    throw std::runtime_error("checkpoint of model " + file.require_meta("model"));
  if (!same_config(config_from(file, &model.config()), model.config()))
    throw std::runtime_error("checkpoint of another model configuration");
  const TensorTable& table = model.table();
  read_tensors(file, "param/", table, model.params().data(), 0, table.total());
  // The optimizer's m and v are indexed from its begin().
  std::vector<T> whole(table.total());
  read_tensors(file, "adamw.m/", table, whole.data(), optimizer.begin(), optimizer.end());
  std::copy(whole.begin() + optimizer.begin(), whole.begin() + optimizer.end(),
            optimizer.m().begin());
  read_tensors(file, "adamw.v/", table, whole.data(), optimizer.begin(), optimizer.end());
  std::copy(whole.begin() + optimizer.begin(), whole.begin() + optimizer.end(),
            optimizer.v().begin());
  optimizer.set_steps(std::stoll(file.require_meta("step")));
  return std::stoull(file.require_meta("seed"));
}

#define WEFT_CHECKPOINT_TYPE(T)                                                                  \
  template void write_tensors<T>(TensorFile&, const std::string&, const TensorTable&, const T*); \
  template void read_tensors<T>(const TensorFile&, const std::string&, const TensorTable&, T*,   \
                                size_t, size_t);                                                 \
  template TensorFile make_checkpoint<T, Gpt<T>>(const Gpt<T>&, const AdamW<T>&, uint64_t);      \
  template TensorFile make_checkpoint<T, Mlp<T>>(const Mlp<T>&, const AdamW<T>&, uint64_t);      \
  template uint64_t restore_checkpoint<T, Gpt<T>>(const TensorFile&, Gpt<T>&, AdamW<T>&);        \
  template uint64_t restore_checkpoint<T, Mlp<T>>(const TensorFile&, Mlp<T>&, AdamW<T>&);
WEFT_CHECKPOINT_TYPE(float)
WEFT_CHECKPOINT_TYPE(double)

}  // namespace weft::trainers

#include "trainers/common/data.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "trainers/common/rng.h"

namespace weft::trainers {

namespace {

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return true;
}

std::string run_bible() {
  // Pretty-printing off (-f): one verse a line after its reference; the whole book in one range.
  FILE* pipe = popen("bible -f 'Gen1:1-Rev22:21' 2>/dev/null", "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run bible (package bible-kjv)");
  std::string out;
  char buffer[1 << 16];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0 || out.empty())
    throw std::runtime_error("bible -f failed: is package bible-kjv installed?");
  return out;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

std::vector<uint8_t> gunzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> out;
  uint8_t buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0) out.insert(out.end(), buffer, buffer + n);
  const bool failed = n < 0;
  gzclose(file);
  if (failed) throw std::runtime_error(path + ": corrupt gzip data");
  return out;
}

}  // namespace

std::string strip_verse_references(const std::string& bible_output) {
  std::string out;
  out.reserve(bible_output.size());
  std::istringstream in(bible_output);
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    out.append(line, space + 1, std::string::npos);
    out.push_back('\n');
  }
  return out;
}

std::string load_kjv_text(const std::string& cache_path) {
  std::string text;
  if (!cache_path.empty() && read_file(cache_path, text) && !text.empty()) return text;
  text = strip_verse_references(run_bible());
  if (!cache_path.empty()) {
    const std::string tmp = cache_path + ".tmp";
    std::ofstream(tmp, std::ios::binary) << text;
    std::rename(tmp.c_str(), cache_path.c_str());
  }
  return text;
}

CharVocab::CharVocab(const std::string& text) {
  bool present[256] = {};
  for (unsigned char c : text) present[c] = true;
  for (int i = 0; i < 256; ++i) {
    index_[i] = -1;
    if (present[i]) {
      index_[i] = static_cast<int32_t>(bytes_.size());
      bytes_.push_back(static_cast<char>(i));
    }
  }
}

std::vector<int32_t> CharVocab::encode(const std::string& text) const {
  std::vector<int32_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    tokens[i] = index_[static_cast<unsigned char>(text[i])];
    if (tokens[i] < 0) throw std::invalid_argument("byte outside the vocabulary");
  }
  return tokens;
}

std::string CharVocab::decode(const std::vector<int32_t>& tokens) const {
  std::string text;
  for (int32_t t : tokens) text.push_back(bytes_.at(static_cast<size_t>(t)));
  return text;
}

TokenSplit split_tokens(const std::vector<int32_t>& tokens, double validation_fraction) {
  const size_t train = tokens.size() - static_cast<size_t>(tokens.size() * validation_fraction);
  return {{tokens.begin(), tokens.begin() + train}, {tokens.begin() + train, tokens.end()}};
}

TextBatcher::TextBatcher(const std::vector<int32_t>* tokens, int seq, uint64_t seed)
    : tokens_(tokens), seq_(seq), seed_(seed) {
  if (tokens->size() < static_cast<size_t>(seq) + 1)
    throw std::invalid_argument("text shorter than one sequence");
}

void TextBatcher::batch(int64_t step, int first_row, int rows, int32_t* inputs,
                        int32_t* targets) const {
  const uint64_t windows = tokens_->size() - seq_;  // starts with seq_ + 1 tokens after them
  for (int r = 0; r < rows; ++r) {
    const int row = first_row + r;
    Rng rng(derive_seed(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(row)));
    const size_t start = rng.below(windows);
    for (int t = 0; t < seq_; ++t) {
      inputs[static_cast<size_t>(r) * seq_ + t] = (*tokens_)[start + t];
      targets[static_cast<size_t>(r) * seq_ + t] = (*tokens_)[start + t + 1];
    }
  }
}

ImageSet read_idx_images(const std::string& images_path, const std::string& labels_path) {
  const std::vector<uint8_t> images = gunzip(images_path);
  const std::vector<uint8_t> labels = gunzip(labels_path);
  if (images.size() < 16 || big_endian(images.data()) != 0x803)
    throw std::runtime_error(images_path + ": not an IDX image file");
  if (labels.size() < 8 || big_endian(labels.data()) != 0x801)
    throw std::runtime_error(labels_path + ": not an IDX label file");
  ImageSet set;
  set.count = static_cast<int>(big_endian(images.data() + 4));
  set.rows = static_cast<int>(big_endian(images.data() + 8));
  set.cols = static_cast<int>(big_endian(images.data() + 12));
  const size_t pixels = static_cast<size_t>(set.count) * set.rows * set.cols;
  if (images.size() != 16 + pixels) throw std::runtime_error(images_path + ": wrong size");
  if (big_endian(labels.data() + 4) != static_cast<uint32_t>(set.count) ||
      labels.size() != 8 + static_cast<size_t>(set.count))
    throw std::runtime_error(labels_path + ": label count differs from the images'");
  set.pixels.assign(images.begin() + 16, images.end());
  set.labels.assign(labels.begin() + 8, labels.end());
  return set;
}

ImageSet load_fashion_mnist(bool train, const std::string& dir) {
  const std::string prefix = dir + (train ? "/train" : "/t10k");
  return read_idx_images(prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz");
}

template <typename T>
ImageBatcher<T>::ImageBatcher(const ImageSet* set, uint64_t seed) : set_(set), seed_(seed) {
  if (set->count <= 0) throw std::invalid_argument("empty image set");
}

namespace {

template <typename T>
void copy_image(const ImageSet& set, size_t index, T* out) {
  const size_t size = static_cast<size_t>(set.rows) * set.cols;
  const uint8_t* pixels = set.pixels.data() + index * size;
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<T>(pixels[i]) / T(255);
}

}  // namespace

template <typename T>
void ImageBatcher<T>::batch(int64_t step, int first_row, int rows, T* inputs,
                            int32_t* labels) const {
  const size_t size = static_cast<size_t>(set_->rows) * set_->cols;
  for (int r = 0; r < rows; ++r) {
    Rng rng(derive_seed(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(first_row + r)));
    const size_t index = rng.below(static_cast<uint64_t>(set_->count));
    copy_image(*set_, index, inputs + r * size);
    labels[r] = set_->labels[index];
  }
}

template <typename T>
void ImageBatcher<T>::range(int first, int rows, T* inputs, int32_t* labels) const {
  const size_t size = static_cast<size_t>(set_->rows) * set_->cols;
  if (first < 0 || first + rows > set_->count) throw std::out_of_range("images out of range");
  for (int r = 0; r < rows; ++r) {
    copy_image(*set_, static_cast<size_t>(first + r), inputs + r * size);
    labels[r] = set_->labels[first + r];
  }
}

template class ImageBatcher<float>;
template class ImageBatcher<double>;

}  // namespace weft::trainers

// Training data from Debian packages, read at run time, and deterministic batches.
//
// Text: the King James Bible of package bible-kjv, as `bible -f 'Gen1:1-Rev22:21'` prints it (one
// verse a line, each after its reference, e.g. "Ge1:1 In the beginning..."); the references are
// dropped, the verses kept one a line. Images: Fashion-MNIST of package dataset-fashion-mnist,
// gzip IDX files in /usr/share/datasets/fashion-mnist.
//
// Batches depend only on (seed, step, row): row r of step s draws from the stream
// derive_seed(seed, s, r), so a data-parallel rank computes just its rows and a resumed run sees
// the batches an uninterrupted one would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::trainers {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The KJV text. With a non-empty cache path, reads it from there when the file exists, otherwise
// runs `bible` and writes the cache. Throws std::runtime_error when bible is missing or fails.
std::string load_kjv_text(const std::string& cache_path);
// "Ge1:1 In the beginning" -> "In the beginning", line by line.
std::string strip_verse_references(const std::string& bible_output);

// Character vocabulary: the sorted set of bytes present in a text; token i is the i-th byte.
class CharVocab {
 public:
  explicit CharVocab(const std::string& text);
  int size() const { return static_cast<int>(bytes_.size()); }
  std::vector<int32_t> encode(const std::string& text) const;  // throws on an unknown byte
  std::string decode(const std::vector<int32_t>& tokens) const;
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  int32_t index_[256];
};

// Tokens split into training (the first 1 - validation_fraction) and validation (the rest).
struct TokenSplit {
  std::vector<int32_t> train, validation;
};
TokenSplit split_tokens(const std::vector<int32_t>& tokens, double validation_fraction);

// Language-model batches: inputs [rows, seq] and targets shifted by one, from random windows.
class TextBatcher {
 public:
  TextBatcher(const std::vector<int32_t>* tokens, int seq, uint64_t seed);
  // Rows [first_row, first_row + rows) of step's batch.
  void batch(int64_t step, int first_row, int rows, int32_t* inputs, int32_t* targets) const;

 private:
  const std::vector<int32_t>* tokens_;
  int seq_;
  uint64_t seed_;
};

struct ImageSet {
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols
  std::vector<uint8_t> labels;  // count
};

// Reads a gzip IDX image file (magic 0x00000803) and its label file (0x00000801).
ImageSet read_idx_images(const std::string& images_path, const std::string& labels_path);
// The Fashion-MNIST training (60000) or test (10000) set.
ImageSet load_fashion_mnist(bool train, const std::string& dir = kFashionMnistDir);

// Classifier batches: pixels scaled to [0, 1], random images with replacement.
template <typename T>
class ImageBatcher {
 public:
  ImageBatcher(const ImageSet* set, uint64_t seed);
  void batch(int64_t step, int first_row, int rows, T* inputs, int32_t* labels) const;
  // Images [first, first + rows) in order (evaluation).
  void range(int first, int rows, T* inputs, int32_t* labels) const;

 private:
  const ImageSet* set_;
  uint64_t seed_;
};

}  // namespace weft::trainers

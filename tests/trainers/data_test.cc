// Data readers: the KJV text of bible-kjv, Fashion-MNIST of dataset-fashion-mnist (each skipped
// when its package is absent), the IDX reader on files made here, vocabulary, splits, batches.
#include "trainers/common/data.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/trainers/support/scratch_files.h"

namespace weft::trainers {
namespace {

bool have_bible() { return std::system("command -v bible >/dev/null 2>&1") == 0; }

TEST(TrainersData, KingJamesText) {
  ScratchFiles scratch;
  if (!have_bible()) GTEST_SKIP() << "bible not found: apt-get install bible-kjv";
  const std::string cache = scratch.path("kjv_cache.txt");
  std::remove(cache.c_str());
  const std::string text = load_kjv_text(cache);
  EXPECT_GT(text.size(), 4000000u);
  EXPECT_EQ(text.rfind("In the beginning God created the heaven and the earth.\n", 0), 0u);
  const std::string last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
  ASSERT_GT(text.size(), last.size());
  EXPECT_EQ(text.substr(text.size() - last.size()), last);
  EXPECT_EQ(load_kjv_text(cache), text);                         // now from the cache
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 31102);  // the verses of the KJV

  const CharVocab vocab(text);
  EXPECT_GT(vocab.size(), 50);
  EXPECT_LT(vocab.size(), 100);
  for (int i = 1; i < vocab.size(); ++i) EXPECT_LT(vocab.bytes()[i - 1], vocab.bytes()[i]);
  const std::vector<int32_t> tokens = vocab.encode(text);
  EXPECT_EQ(vocab.decode({tokens.begin(), tokens.begin() + 16}), "In the beginning");
  const TokenSplit split = split_tokens(tokens, 0.1);
  EXPECT_EQ(split.train.size() + split.validation.size(), tokens.size());
  EXPECT_NEAR(static_cast<double>(split.validation.size()) / tokens.size(), 0.1, 1e-6);
  EXPECT_EQ(split.train.front(), tokens.front());
  EXPECT_EQ(split.validation.back(), tokens.back());
}

TEST(TrainersData, StripsVerseReferences) {
  EXPECT_EQ(strip_verse_references("Ge1:1 In the beginning\nRev22:21 Amen.\n"),
            "In the beginning\nAmen.\n");
}

TEST(TrainersData, VocabularyIsTheSortedBytes) {
  const CharVocab vocab("banana!");
  EXPECT_EQ(vocab.bytes(), "!abn");
  EXPECT_EQ(vocab.encode("nab"), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_THROW(vocab.encode("x"), std::invalid_argument);
}

TEST(TrainersData, TextBatchesDependOnSeedStepAndRowOnly) {
  std::vector<int32_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  const int T = 8, B = 4;
  const TextBatcher batcher(&tokens, T, 11);
  std::vector<int32_t> in(B * T), tg(B * T), in2(B * T), tg2(B * T);
  batcher.batch(5, 0, B, in.data(), tg.data());
  batcher.batch(5, 0, B, in2.data(), tg2.data());
  EXPECT_EQ(in, in2);
  for (int i = 0; i < B * T; ++i) EXPECT_EQ(tg[i], in[i] + 1);  // targets are the next tokens
  // Rows 2..3 alone, as a data-parallel rank asks for them.
  std::vector<int32_t> half(2 * T), half_targets(2 * T);
  batcher.batch(5, 2, 2, half.data(), half_targets.data());
  EXPECT_TRUE(std::equal(half.begin(), half.end(), in.begin() + 2 * T));
  batcher.batch(6, 0, B, in2.data(), tg2.data());
  EXPECT_NE(in, in2);
  const TextBatcher other_seed(&tokens, T, 12);
  other_seed.batch(5, 0, B, in2.data(), tg2.data());
  EXPECT_NE(in, in2);
  for (int step = 0; step < 50; ++step) {
    batcher.batch(step, 0, B, in2.data(), tg2.data());
    for (int32_t t : tg2) ASSERT_LT(t, 1000);
  }
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(TrainersData, IdxReaderOnSmallFiles) {
  ScratchFiles scratch;
  // Two 2x3 images and their labels.
  std::vector<uint8_t> images = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<uint8_t>(i * 20));
  const std::vector<uint8_t> labels = {0, 0, 8, 1, 0, 0, 0, 2, 7, 3};
  const std::string ip = scratch.path("images.gz"), lp = scratch.path("labels.gz");
  write_gzip(ip, images);
  write_gzip(lp, labels);
  const ImageSet set = read_idx_images(ip, lp);
  EXPECT_EQ(set.count, 2);
  EXPECT_EQ(set.rows, 2);
  EXPECT_EQ(set.cols, 3);
  EXPECT_EQ(set.pixels[11], 220);
  EXPECT_EQ(set.labels, (std::vector<uint8_t>{7, 3}));
  const ImageBatcher<float> batcher(&set, 1);
  std::vector<float> x(12);
  std::vector<int32_t> y(2);
  batcher.range(0, 2, x.data(), y.data());
  EXPECT_FLOAT_EQ(x[11], 220.0f / 255.0f);
  EXPECT_EQ(y[1], 3);

  // Wrong magic, wrong count, not gzip at all.
  std::vector<uint8_t> bad = images;
  bad[3] = 1;
  write_gzip(ip, bad);
  EXPECT_THROW(read_idx_images(ip, lp), std::runtime_error);
  write_gzip(ip, images);
  std::vector<uint8_t> short_labels = labels;
  short_labels.pop_back();
  write_gzip(lp, short_labels);
  EXPECT_THROW(read_idx_images(ip, lp), std::runtime_error);
  EXPECT_THROW(read_idx_images(scratch.path("missing.gz"), lp), std::runtime_error);
}

TEST(TrainersData, FashionMnist) {
  if (access((std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz").c_str(), R_OK) != 0)
    GTEST_SKIP() << "Fashion-MNIST not found: apt-get install dataset-fashion-mnist";
  const ImageSet train = load_fashion_mnist(true);
  const ImageSet test = load_fashion_mnist(false);
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(train.rows, 28);
  EXPECT_EQ(train.cols, 28);
  EXPECT_EQ(train.pixels.size(), 60000u * 784);
  EXPECT_EQ(train.labels[0], 9);  // the first training image is an ankle boot
  // Ten classes, balanced: 6000 training and 1000 test images each.
  std::array<int, 10> train_counts{}, test_counts{};
  for (uint8_t l : train.labels) ++train_counts.at(l);
  for (uint8_t l : test.labels) ++test_counts.at(l);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_counts[c], 6000) << c;
    EXPECT_EQ(test_counts[c], 1000) << c;
  }
  const ImageBatcher<double> batcher(&train, 3);
  std::vector<double> x(4 * 784);
  std::vector<int32_t> y(4);
  batcher.batch(0, 0, 4, x.data(), y.data());
  for (double v : x) ASSERT_TRUE(v >= 0.0 && v <= 1.0);
  for (int32_t l : y) ASSERT_TRUE(l >= 0 && l < 10);
}

}  // namespace
}  // namespace weft::trainers

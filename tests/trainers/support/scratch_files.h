// Scratch file names for the trainer tests, per process so that runs from several build trees on
// one machine do not share files; the files are removed when the object goes out of scope.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace weft::trainers {

class ScratchFiles {
 public:
  ScratchFiles() = default;
  ScratchFiles(const ScratchFiles&) = delete;
  ScratchFiles& operator=(const ScratchFiles&) = delete;
  ~ScratchFiles() {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  std::string path(const std::string& name) {
    paths_.push_back(testing::TempDir() + "/weft_trainers_" + std::to_string(getpid()) + "_" +
                     name);
    return paths_.back();
  }

 private:
  std::vector<std::string> paths_;
};

}  // namespace weft::trainers

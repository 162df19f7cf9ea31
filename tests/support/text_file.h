// Reading text back in tests: whole files, counts of a phrase, and the part of a log written
// since a point.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace weft::test {

// The file's bytes; empty when it cannot be read.
inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// How many times `what` starts in `text` (overlapping matches count).
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text a log file gained since construction.
class LogWatch {
 public:
  explicit LogWatch(std::string path) : path_(std::move(path)), start_(readFile(path_).size()) {}
  std::string text() const { return readFile(path_).substr(start_); }

 private:
  std::string path_;
  size_t start_;
};

}  // namespace weft::test

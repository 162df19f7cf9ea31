// Helpers shared by the topology tests: where the reference files are, reading a file.
#pragma once
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

namespace weft::topo::testing {

inline std::string goldenDir() { return std::string(WEFT_SOURCE_DIR) + "/tests/golden/topologies"; }
inline std::string golden(const std::string& name) { return goldenDir() + "/" + name; }
// Azure's published files live outside the project (../shared/topologies); tests skip without them.
inline std::string sharedDir() { return WEFT_SHARED_TOPOLOGIES; }
inline bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace weft::topo::testing

#define WEFT_REQUIRE_SHARED(file)                                                          \
  do {                                                                                     \
    if (!::weft::topo::testing::exists(::weft::topo::testing::sharedDir() + "/" + (file))) \
      GTEST_SKIP() << "Azure topology " << (file) << " not found in "                      \
                   << ::weft::topo::testing::sharedDir();                                  \
  } while (0)

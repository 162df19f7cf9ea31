// The library's INFO lines (INIT, TUNING) in a file of this test process, for tests that read
// which plan ran: the log is the only window on it. Including this header routes the log there
// at static initialisation, before the logger first reads its settings; the file is removed when
// the tests are done. Nothing is created until the first line is logged.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace weft::test {

inline const std::string& infoLogPath() {
  static const std::string path = "/tmp/weft-info-" + std::to_string(getpid()) + ".log";
  return path;
}

class InfoLogCleanup : public ::testing::Environment {
 public:
  void TearDown() override { unlink(infoLogPath().c_str()); }
};

// True once the log goes to infoLogPath(); tests assert it, which also keeps the routing linked.
inline const bool kInfoLogRouted = [] {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,TUNING", 1);
  setenv("NCCL_DEBUG_FILE", infoLogPath().c_str(), 1);
  ::testing::AddGlobalTestEnvironment(new InfoLogCleanup);
  return true;
}();

}  // namespace weft::test

// Communicators for ranks that are threads of this process, and exact-result checks on them.
#pragma once
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/support/collective_check.h"

namespace weft::test {

// `n` ranks from ncclCommInitAll, destroyed with the object. A failed init is reported as a test
// failure, with the library's last error.
class Comms {
 public:
  explicit Comms(int n) : comms_(n) {
    EXPECT_EQ(ncclCommInitAll(comms_.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  ~Comms() {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;
  const std::vector<ncclComm_t>& get() const { return comms_; }

 private:
  std::vector<ncclComm_t> comms_;
};

// Runs body(rank, comm) on one thread per rank of fresh communicators of n ranks, then destroys
// them.
template <class F>
void onRanks(int n, F body) {
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, comms[r]); });
  for (auto& t : threads) t.join();
  for (auto c : comms) ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Runs `c` on every rank and expects success and exact results.
inline void expectExact(const std::vector<ncclComm_t>& comms, const CheckCase& c) {
  const int n = static_cast<int>(comms.size());
  CheckResult r = runCheck(comms, c);
  EXPECT_EQ(r.status, ncclSuccess) << describe(c, n) << ": " << r.message;
  EXPECT_EQ(r.wrong, 0u) << describe(c, n) << ": " << r.message;
}

}  // namespace weft::test

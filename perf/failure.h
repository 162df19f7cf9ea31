// How the perf tools fail: one line naming the host and the failure, then the end of the process
// (status 2), as nccl-tests does.
#pragma once
#include <string>

#include "nccl.h"

namespace weft::perf {

// This host's name, for failure messages.
const std::string& hostName();
// Prints "<host>: Test failure: <msg>" and ends the process with status 2 (other threads may be
// blocked in collectives whose peers will never come).
[[noreturn]] void die(const std::string& msg);
// Ends the process with status 2 and nccl-tests' failure line when r is not ncclSuccess.
void ncclCheck(ncclResult_t r, const char* what, const char* file, int line);

#define PERF_NCCL(call) ncclCheck((call), #call, __FILE__, __LINE__)

}  // namespace weft::perf

// ncclGroupStart / ncclGroupEnd: calls made inside a group (per thread, nestable) are collected
// and launched together at the outermost End, so one thread can drive several ranks.
#pragma once
#include <functional>
#include <string>

#include "src/common/error.h"
#include "src/core/call.h"

namespace weft::core {

void groupStart();
// Ends one nesting level; the outermost End launches everything collected.
Status groupEnd(std::string* why);
int groupDepth();
// ncclGroupSimulateEnd: ends one nesting level like groupEnd, but the outermost level runs only
// the deferred jobs (communicator init) and, instead of launching the collected calls, sets
// *estimatedUs to the cost model's time for them: per communicator the calls' times summed in
// order, the slowest communicator over all (they run concurrently). Nothing is executed.
Status groupSimulateEnd(double* estimatedUs, std::string* why);

// Runs `call` now (blocking on a null stream, queued on a host stream) or, inside a group,
// collects it for the group's End.
Status submit(const Call& call, std::string* why);

// A blocking collective outside a group that repeats this thread's last one (same
// communicator, buffers, count, type, op, root; the last one succeeded) and whose rank moves a
// small message or two (exec::runStraight): runs it and returns true, its outcome in *st (a
// failure is recorded on the communicator: its lastError() says why). False: nothing was done;
// submit it. Never throws.
bool repeatStraight(const Call& call, Status* st);

// Jobs that must run concurrently with the other ranks' (communicator init, split): run now
// outside a group, in parallel threads at the group's End inside one.
Status deferOrRun(std::function<Status(std::string*)> job, std::string* why);

}  // namespace weft::core

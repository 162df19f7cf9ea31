// The plan verifier's entry points and the text of its messages (see verifier_internal.h).
#include "src/plan/verifier.h"

#include <sstream>

#include "src/common/error.h"
#include "src/plan/verifier_internal.h"

namespace weft::plan {
namespace detail {

[[noreturn]] void reject(const std::string& message) {
  throw Error(Status::kInvalidArgument, "plan verifier: " + message);
}

std::string bufferText(uint16_t buffer) {
  switch (buffer) {
    case kInput:
      return "input";
    case kOutput:
      return "output";
    case kScratch:
      return "scratch";
    default:
      return "extra" + std::to_string(buffer - kExtra);
  }
}

std::string stepText(int rank, int lane, int step, const Step& s) {
  std::ostringstream out;
  out << "rank " << rank << " lane " << lane << " step " << step << " (" << opName(s.op);
  if (opRecvs(s.op)) out << " from=" << s.recvPeer;
  if (opSends(s.op)) out << " to=" << s.sendPeer;
  out << " n=" << s.count << ")";
  return out.str();
}

}  // namespace detail

void verify(const Plan& plan, const VerifyOptions& options) {
  if (!plan.outOfPlaceSafe && (!plan.inPlaceSafe || plan.spec.coll == Collective::kSendRecv))
    detail::reject("plan is safe neither in place nor out of place");
  detail::checkStructure(plan);
  if (plan.outOfPlaceSafe) detail::Simulator(plan, options, false).run();
  if (plan.inPlaceSafe && plan.spec.coll != Collective::kSendRecv)
    detail::Simulator(plan, options, true).run();
}

std::string verifyMessage(const Plan& plan, const VerifyOptions& options) {
  try {
    verify(plan, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace weft::plan

// The parts of IbConnection that the progress thread (progress.h) and the tests call.
#include <arpa/inet.h>

#include <algorithm>

#include "transports/ib/connection.h"

namespace weft::ib {

void IbConnection::drainCqEvents() {
  ibv_cq* cq = nullptr;
  void* cqContext = nullptr;
  bool got = false;
  while (v_->getCqEvent(channel_, &cq, &cqContext) == 0) {
    v_->ackCqEvents(cq, 1);
    got = true;
  }
  // Re-armed before the poll that follows, so a completion after that poll raises an event.
  if (got && ibv_req_notify_cq(cq_, 0)) fail("ibv_req_notify_cq failed");
}

void IbConnection::backgroundTurn() {
  drainCqEvents();
  progress();
}

void IbConnection::transportFds(std::vector<int>* fds) { fds->push_back(channel_->fd); }

void IbConnection::failFromDevice(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  fail(why);
  if (p_.bell) p_.bell->ring();
}

bool IbConnection::ownsQp(const ibv_qp* qp) const {
  return std::find(qps_.begin(), qps_.end(), qp) != qps_.end();
}

void IbConnection::postImmediateForTesting(uint32_t imm) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!connected_) return;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 0;  // a send on queue pair 0 (connection.cc: wrId)
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.num_sge = 0;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = peer_.recvAddr;
  wr.wr.rdma.rkey = peer_.recvKey;
  if (ibv_post_send(qps_[0], &wr, &bad) == 0) ++sendsOutstanding_[0];
}

}  // namespace weft::ib

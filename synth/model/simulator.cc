// The simulator's event loop (synth/model/simulator.h); the tables it runs on are laid out and
// validated by synth/model/sim_plan_index.h.
#include "synth/model/simulator.h"

#include <algorithm>
#include <limits>
#include <queue>

#include "synth/model/cost_model.h"
#include "synth/model/sim_plan_index.h"

namespace weft::synth {
namespace {

using plan::Op;
using plan::Plan;
using plan::Step;
using sim::Fifo;
using sim::LaneState;
using sim::Phase;
using sim::PlanIndex;
using sim::StepInfo;
using sim::Wait;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kUnboundedGBs = 1e12;  // rate of transfers that cross no link (self sends)

struct Flow {
  int lane = 0;
  double left = 0, total = 0, weight = 1;
  const std::vector<int>* route = nullptr;
};

struct Event {
  double t;
  uint64_t seq;
  int kind;  // 0: slice arrives (a = fifo, b = absolute entry index); 1: lane timer (a = lane)
  int a;
  uint64_t b;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Engine {
 public:
  Engine(const Plan& plan, const Fabric& fabric, const SimOptions& options)
      : plan_(plan), fabric_(fabric), opt_(options), share_(linkCapacities(fabric)) {
    PlanIndex ix = sim::indexPlan(plan, fabric, options);
    lanes_ = std::move(ix.lanes);
    laneBase_ = std::move(ix.laneBase);
    steps_ = std::move(ix.steps);
    fifos_ = std::move(ix.fifos);
    weighted_ = ix.weighted;
  }

  SimResult run() {
    result_.links.assign(fabric_.links.size(), {});
    result_.rankFinishUs.assign(plan_.spec.nranks, 0);
    result_.laneFinishUs.resize(plan_.spec.nranks);
    for (int r = 0; r < plan_.spec.nranks; ++r)
      result_.laneFinishUs[r].assign(plan_.programs[r].lanes.size(), 0.0);
    for (size_t l = 0; l < lanes_.size(); ++l) work_.push_back(static_cast<int>(l));
    drainWork();
    while (true) {
      if (!freed_.empty()) ratesDirty_ = true;  // flows ended without a like successor
      freed_.clear();
      if (ratesDirty_) {
        route_ptrs_.clear();
        weights_.clear();
        for (const Flow& f : flows_) route_ptrs_.push_back(f.route), weights_.push_back(f.weight);
        share_.compute(route_ptrs_, rates_, kUnboundedGBs, weighted_ ? &weights_ : nullptr);
        ratesDirty_ = false;
      }
      double tf = kInf;
      for (size_t i = 0; i < flows_.size(); ++i)
        tf = std::min(tf, now_ + flows_[i].left / (rates_[i] * kBytesPerUsPerGBs));
      const double te = events_.empty() ? kInf : events_.top().t;
      const double t = std::min(tf, te);
      if (t == kInf) break;
      advanceFlows(t);
      finishFlows();
      while (!events_.empty() && events_.top().t <= now_) {
        const Event e = events_.top();
        events_.pop();
        handle(e);
      }
      drainWork();
    }
    reportDeadlock();
    finishResult();
    return std::move(result_);
  }

 private:
  static std::vector<double> linkCapacities(const Fabric& f) {
    std::vector<double> c;
    for (const FabricLink& l : f.links) c.push_back(l.bw);
    return c;
  }

  [[noreturn]] void reject(const std::string& msg) const { sim::rejectPlan(plan_, msg); }

  std::string describe(int g) const {
    const StepInfo& s = steps_[g];
    return sim::stepText(lanes_[s.lane].rank, lanes_[s.lane].lane, s.index, *s.step);
  }

  // ---- flows ----

  void startFlow(int lane, uint64_t bytes, const std::vector<int>* route) {
    for (int l : *route) result_.links[l].bytes += static_cast<double>(bytes);
    const double weight = static_cast<double>(lanes_[lane].weight);
    flows_.push_back({lane, static_cast<double>(bytes), static_cast<double>(bytes), weight, route});
    // A flow like one that just ended (same route and weight) leaves every rate as it was: flows
    // with equal routes and weights get equal rates. Lanes streaming slice after slice hit this.
    for (size_t i = 0; i < freed_.size(); ++i)
      if (freed_[i].route == route && freed_[i].weight == weight) {
        rates_.push_back(freed_[i].rate);
        freed_[i] = freed_.back();
        freed_.pop_back();
        return;
      }
    rates_.push_back(0);
    ratesDirty_ = true;
  }

  void advanceFlows(double t) {
    const double dt = t - now_;
    if (dt > 0) {
      for (size_t i = 0; i < flows_.size(); ++i)
        flows_[i].left -= rates_[i] * kBytesPerUsPerGBs * dt;
      if (!flows_.empty())
        for (int l : share_.usedLinks()) {
          LinkUsage& u = result_.links[l];
          if (u.busyUs == 0) u.firstUs = now_;
          u.busyUs += dt;
          u.lastUs = t;
        }
    }
    now_ = std::max(now_, t);
  }

  void finishFlows() {
    std::vector<int> doneLanes;
    for (size_t i = 0; i < flows_.size();) {
      const Flow& f = flows_[i];
      if (f.left <= 1e-9 * f.total + 1e-9) {
        doneLanes.push_back(f.lane);
        freed_.push_back({f.route, f.weight, rates_[i]});
        flows_[i] = flows_.back();
        rates_[i] = rates_.back();
        flows_.pop_back();
        rates_.pop_back();
      } else {
        ++i;
      }
    }
    for (int lane : doneLanes) sliceSent(lane);
  }

  // ---- events ----

  void schedule(double t, int kind, int a, uint64_t b) { events_.push({t, seq_++, kind, a, b}); }

  void handle(const Event& e) {
    if (e.kind == 0) {
      arrive(e.a, e.b);
    } else {
      LaneState& L = lanes_[e.a];
      if (!L.overheadDone)
        L.overheadDone = true;
      else
        L.localDone = true;
      L.phase = Phase::kReady;
      work_.push_back(e.a);
    }
  }

  void arrive(int fifo, uint64_t absolute) {
    Fifo& f = fifos_[fifo];
    f.q[absolute - f.popped].arrived = true;
    if (f.waitingReceiver >= 0 && absolute == f.popped) {
      const int lane = f.waitingReceiver;
      f.waitingReceiver = -1;
      note(lane, f.q.front().sender, Wait::kData);
      wake(lane);
    }
  }

  // Frees the oldest slot of `fifo`, consumed by step g.
  void pop(int fifo, int g) {
    Fifo& f = fifos_[fifo];
    f.q.pop_front();
    ++f.popped;
    if (f.waitingSender >= 0) {
      const int lane = f.waitingSender;
      f.waitingSender = -1;
      note(lane, g, Wait::kSlot);
      wake(lane);
    }
  }

  void note(int lane, int blocker, Wait why) {
    const LaneState& L = lanes_[lane];
    StepInfo& s = steps_[L.firstStep + L.cur];
    s.blocker = blocker;
    s.why = why;
  }

  void wake(int lane) {
    if (lanes_[lane].phase == Phase::kBlocked) {
      lanes_[lane].phase = Phase::kReady;
      work_.push_back(lane);
    }
  }

  void drainWork() {
    while (!work_.empty()) {
      const int lane = work_.back();
      work_.pop_back();
      drive(lane);
    }
  }

  // ---- lanes ----

  // Step g starts sending (or receiving) on `fifo`: no other lane may be doing so, or their
  // messages would interleave in an order the plan does not define.
  void claim(int g, int fifo, bool send) {
    if (fifo < 0) return;
    Fifo& f = fifos_[fifo];
    int& last = send ? f.sendingStep : f.receivingStep;
    if (last >= 0 && !steps_[last].done && steps_[last].lane != steps_[g].lane)
      reject(
          describe(g) + " and " + describe(last) + " both " +
          (send ? "send to rank " + std::to_string(f.to)
                : "receive from rank " + std::to_string(f.from)) +
          " on channel " + std::to_string(f.channel) +
          " at once: lanes sharing a peer and direction need different channels or a dependency");
    last = g;
  }

  void completeStep(int lane) {
    LaneState& L = lanes_[lane];
    const int g = L.firstStep + L.cur;
    StepInfo& s = steps_[g];
    s.done = true;
    s.endUs = now_;
    ++result_.events;
    for (int w : s.depWaiters) wake(w);
    s.depWaiters.clear();
    ++L.cur;
    L.started = L.overheadDone = L.localDone = false;
    L.slice = 0;
  }

  // A slice of the lane's current step has left its sender.
  // `requeue`: the lane continues from the work list (false: its caller continues it).
  void sliceSent(int lane, bool requeue = true) {
    LaneState& L = lanes_[lane];
    const int g = L.firstStep + L.cur;
    const StepInfo& s = steps_[g];
    Fifo& out = fifos_[s.sendFifo];
    const uint64_t absolute = L.sending;
    ++result_.events;
    if (out.latencyUs > 0)
      schedule(now_ + out.latencyUs, 0, s.sendFifo, absolute);
    else
      arrive(s.sendFifo, absolute);
    if (s.recvFifo >= 0) pop(s.recvFifo, g);
    ++L.slice;
    L.phase = Phase::kReady;
    if (requeue) work_.push_back(lane);
  }

  void drive(int lane) {
    LaneState& L = lanes_[lane];
    if (L.phase != Phase::kReady) return;
    while (L.cur < L.steps) {
      const int g = L.firstStep + L.cur;
      StepInfo& s = steps_[g];
      const Step& st = *s.step;
      if (!L.started) {
        for (const plan::StepRef& d : st.deps) {
          const int dg = lanes_[laneBase_[L.rank] + d.lane].firstStep + d.step;
          if (!steps_[dg].done) {
            steps_[dg].depWaiters.push_back(lane);
            L.phase = Phase::kBlocked;
            return;
          }
        }
        // What this step waited for: the last of its lane's previous step and its deps.
        s.blocker = L.cur > 0 ? g - 1 : -1;
        s.why = L.cur > 0 ? Wait::kLane : Wait::kNone;
        for (const plan::StepRef& d : st.deps) {
          const int dg = lanes_[laneBase_[L.rank] + d.lane].firstStep + d.step;
          if (s.blocker < 0 || steps_[dg].endUs > steps_[s.blocker].endUs) {
            s.blocker = dg;
            s.why = Wait::kDependency;
          }
        }
        claim(g, s.sendFifo, true);
        claim(g, s.recvFifo, false);
        L.started = true;
        s.startUs = now_;
        if (opt_.stepOverheadUs > 0 && !L.overheadDone) {
          L.phase = Phase::kBusy;
          schedule(now_ + opt_.stepOverheadUs, 1, lane, 0);
          return;
        }
        L.overheadDone = true;
      }
      if (st.op == Op::kNop || st.op == Op::kCopy || st.op == Op::kReduce) {
        if (st.op != Op::kNop && opt_.localBw > 0 && !L.localDone && s.bytes > 0) {
          L.phase = Phase::kBusy;
          schedule(now_ + s.bytes / (opt_.localBw * kBytesPerUsPerGBs), 1, lane, 0);
          return;
        }
        completeStep(lane);
        continue;
      }
      while (L.slice < s.nslices) {
        if (s.recvFifo >= 0) {
          Fifo& in = fifos_[s.recvFifo];
          if (in.q.empty() || !in.q.front().arrived) {
            in.waitingReceiver = lane;
            L.phase = Phase::kBlocked;
            return;
          }
          if (L.slice == 0 && in.q.front().msgCount != st.count)
            reject(describe(g) + " receives " + std::to_string(st.count) + " elements but " +
                   describe(in.q.front().sender) + " sends " +
                   std::to_string(in.q.front().msgCount));
        }
        // Even slices: slice i covers bytes [i*B/n, (i+1)*B/n).
        const uint64_t bytes = sliceEnd(s, L.slice + 1) - sliceEnd(s, L.slice);
        if (s.sendFifo >= 0) {
          Fifo& out = fifos_[s.sendFifo];
          if (out.q.size() >= static_cast<size_t>(std::max(1, opt_.fifoSlots))) {
            out.waitingSender = lane;
            L.phase = Phase::kBlocked;
            return;
          }
          L.sending = out.popped + out.q.size();
          out.q.push_back({g, st.count, false});
          if (bytes == 0 || out.route->empty()) {
            sliceSent(lane, false);  // nothing crosses a link: it leaves at once
            continue;
          }
          startFlow(lane, bytes, out.route);
          L.phase = Phase::kBusy;
          return;
        }
        // Receive only: the slice is consumed as it arrives.
        pop(s.recvFifo, g);
        ++L.slice;
        ++result_.events;
      }
      completeStep(lane);
    }
    L.phase = Phase::kDone;
    result_.rankFinishUs[L.rank] = std::max(result_.rankFinishUs[L.rank], now_);
    result_.laneFinishUs[L.rank][L.lane] = now_;
  }

  static uint64_t sliceEnd(const StepInfo& s, uint64_t i) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(s.bytes) * i / s.nslices);
  }

  void reportDeadlock() {
    std::vector<std::string> stuck;
    for (const LaneState& L : lanes_) {
      if (L.cur >= L.steps) continue;
      const int g = L.firstStep + L.cur;
      const Step& st = *steps_[g].step;
      std::string why;
      if (!L.started) {
        for (const plan::StepRef& d : st.deps) {
          const int dg = lanes_[laneBase_[L.rank] + d.lane].firstStep + d.step;
          if (!steps_[dg].done) {
            why = "waits for " + describe(dg);
            break;
          }
        }
      } else if (steps_[g].recvFifo >= 0 && (fifos_[steps_[g].recvFifo].q.empty() ||
                                             !fifos_[steps_[g].recvFifo].q.front().arrived)) {
        why = "waits for data from rank " + std::to_string(st.recvPeer) + " on channel " +
              std::to_string(fifos_[steps_[g].recvFifo].channel);
      } else {
        why = "waits for a free slot towards rank " + std::to_string(st.sendPeer) + " on channel " +
              std::to_string(fifos_[steps_[g].sendFifo].channel);
      }
      stuck.push_back(describe(g) + " " + why);
    }
    if (stuck.empty()) return;
    std::string msg = "deadlock (FIFOs of " + std::to_string(opt_.fifoSlots) + " slots): ";
    for (size_t i = 0; i < stuck.size() && i < 6; ++i) msg += (i ? "; " : "") + stuck[i];
    if (stuck.size() > 6) msg += "; and " + std::to_string(stuck.size() - 6) + " more lanes";
    reject(msg);
  }

  void finishResult() {
    int last = -1;
    for (size_t g = 0; g < steps_.size(); ++g)
      if (last < 0 || steps_[g].endUs > steps_[last].endUs) last = static_cast<int>(g);
    result_.timeUs = last >= 0 ? steps_[last].endUs : 0;
    if (last < 0) return;
    const LaneState& L = lanes_[steps_[last].lane];
    result_.lastStep = {L.rank, L.lane, steps_[last].index};
    std::vector<CriticalStep> path;
    for (int g = last, hops = 0; g >= 0 && hops <= static_cast<int>(steps_.size()); ++hops) {
      const StepInfo& s = steps_[g];
      const LaneState& SL = lanes_[s.lane];
      path.push_back({{SL.rank, SL.lane, s.index}, s.startUs, s.endUs, sim::waitName(s.why)});
      g = s.blocker;
    }
    std::reverse(path.begin(), path.end());
    result_.criticalPath = std::move(path);
  }

  const Plan& plan_;
  const Fabric& fabric_;
  SimOptions opt_;
  FairShare share_;
  std::vector<LaneState> lanes_;
  std::vector<int> laneBase_;
  std::vector<StepInfo> steps_;
  std::vector<Fifo> fifos_;
  std::vector<Flow> flows_;
  std::vector<double> rates_;
  std::vector<double> weights_;
  bool weighted_ = false;
  struct Freed {
    const std::vector<int>* route;
    double weight, rate;
  };
  std::vector<Freed> freed_;  // flows ended since the rates were last computed
  std::vector<const std::vector<int>*> route_ptrs_;
  bool ratesDirty_ = false;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  std::vector<int> work_;
  double now_ = 0;
  SimResult result_;
};

}  // namespace

SimResult simulate(const plan::Plan& plan, const Fabric& fabric, const SimOptions& options) {
  Engine engine(plan, fabric, options);
  return engine.run();
}

}  // namespace weft::synth

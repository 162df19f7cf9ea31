// importMsccl: MSCCL XML into a ChunkPlan in normal form, every problem an error that names the
// element and its line (see msccl_xml.h).
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <pugixml.hpp>
#include <vector>

#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/msccl_xml_internal.h"

namespace weft::plan {

namespace {

using detail::bufferLetter;
using detail::kOpTypes;
using detail::OpType;
using detail::rooted;

constexpr size_t kMaxNameLength = 256;

// One <step> as read, before nops are folded.
struct RawStep {
  Step step;
  int depLane = -1, depStep = -1;  // file indices
  ptrdiff_t offset = -1;           // of the element, for messages
};

struct RawLane {
  int32_t channel = 0;
  int send = -1, recv = -1;
  bool present = false;
  ptrdiff_t offset = -1;
  std::vector<RawStep> steps;
};

class Importer {
 public:
  Importer(std::string_view text, const std::string& source, const MscclLimits& limits)
      : text_(text), source_(source), lim_(limits) {}

  ChunkPlan run() {
    if (text_.size() > lim_.maxBytes)
      fail(Status::kInvalidArgument, source_ + ": " + std::to_string(text_.size()) +
                                         " bytes exceeds the " + std::to_string(lim_.maxBytes) +
                                         "-byte limit for MSCCL XML");
    for (size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') lineStarts_.push_back(i + 1);
    pugi::xml_document doc;
    pugi::xml_parse_result res =
        doc.load_buffer(text_.data(), text_.size(), pugi::parse_default, pugi::encoding_utf8);
    if (!res)
      fail(Status::kInvalidArgument, source_ + ":" + std::to_string(lineOf(res.offset)) +
                                         ": XML parse error: " + res.description());
    pugi::xml_node algo;
    for (pugi::xml_node n : doc.children()) {
      if (n.type() != pugi::node_element) continue;
      if (algo) error(n, "a second top-level element (MSCCL XML has one <algo>)");
      algo = n;
    }
    if (!algo) fail(Status::kInvalidArgument, source_ + ": no <algo> element");
    if (std::string_view(algo.name()) != "algo")
      error(algo, "the top-level element must be <algo>");
    return readAlgo(algo);
  }

 private:
  size_t lineOf(ptrdiff_t offset) const {
    if (offset < 0) return 0;
    auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), static_cast<size_t>(offset));
    return static_cast<size_t>(it - lineStarts_.begin());
  }

  // "<gpu id="1"> <tb id="2"> <step s="3">": the element and the ones it sits in.
  static std::string describe(pugi::xml_node n) {
    std::vector<std::string> parts;
    for (; n && n.type() == pugi::node_element; n = n.parent()) {
      std::string s = "<" + std::string(n.name()).substr(0, 40);
      std::string_view name = n.name();
      const char* key = name == "step" ? "s" : name == "algo" ? "name" : "id";
      if (pugi::xml_attribute a = n.attribute(key)) {
        std::string v = a.value();
        if (v.size() > 40) v = v.substr(0, 40) + "...";
        s += " " + std::string(key) + "=\"" + v + "\"";
      }
      parts.push_back(s + ">");
      if (name == "algo") break;
    }
    std::string out;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += (out.empty() ? "" : " ") + *it;
    return out;
  }

  [[noreturn]] void errorAt(ptrdiff_t offset, const std::string& where,
                            const std::string& what) const {
    fail(Status::kInvalidArgument,
         source_ + ":" + std::to_string(lineOf(offset)) + ": " + where + ": " + what);
  }
  [[noreturn]] void error(pugi::xml_node n, const std::string& what) const {
    errorAt(n.offset_debug(), describe(n), what);
  }

  int64_t intAttr(pugi::xml_node n, const char* key, int64_t lo, int64_t hi) const {
    pugi::xml_attribute a = n.attribute(key);
    if (!a) error(n, std::string("missing attribute ") + key);
    std::string_view v = a.value();
    int64_t x = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size())
      error(n, std::string("attribute ") + key + "=\"" + std::string(v.substr(0, 40)) +
                   "\" is not an integer");
    if (x < lo || x > hi)
      error(n, std::string("attribute ") + key + "=" + std::to_string(x) + " is outside [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }

  std::string strAttr(pugi::xml_node n, const char* key) const {
    pugi::xml_attribute a = n.attribute(key);
    if (!a) error(n, std::string("missing attribute ") + key);
    return a.value();
  }

  uint16_t bufferAttr(pugi::xml_node n, const char* key) const {
    std::string v = strAttr(n, key);
    if (v == "i") return kInput;
    if (v == "o") return kOutput;
    if (v == "s") return kScratch;
    error(n, std::string("attribute ") + key + "=\"" + v.substr(0, 40) +
                 "\" is not a buffer (i, o or s)");
  }

  void countElement(pugi::xml_node n) {
    if (++elements_ > lim_.maxElements)
      error(n, "more than " + std::to_string(lim_.maxElements) + " elements");
  }

  ChunkPlan readAlgo(pugi::xml_node algo) {
    ChunkPlan cp;
    if (pugi::xml_attribute a = algo.attribute("name")) cp.name = a.value();
    if (cp.name.size() > kMaxNameLength)
      error(algo, "name is longer than " + std::to_string(kMaxNameLength) + " characters");
    cp.proto = strAttr(algo, "proto");
    if (cp.proto != "Simple" && cp.proto != "LL" && cp.proto != "LL128")
      error(algo, "proto \"" + cp.proto.substr(0, 40) + "\" is not Simple, LL or LL128");
    nchannels_ = static_cast<int>(intAttr(algo, "nchannels", 1, lim_.maxChannels));
    cp.chunksPerLoop =
        static_cast<uint64_t>(intAttr(algo, "nchunksperloop", 1, lim_.maxChunksPerLoop));
    cp.nranks = static_cast<int32_t>(intAttr(algo, "ngpus", 1, lim_.maxRanks));
    std::string coll = strAttr(algo, "coll");
    if (!mscclCollective(coll, &cp.coll))
      error(algo, "collective \"" + coll.substr(0, 40) + "\" is not supported");
    cp.inPlace = intAttr(algo, "inplace", 0, 1) == 1;
    cp.outOfPlace = intAttr(algo, "outofplace", 0, 1) == 1;
    if (!cp.inPlace && !cp.outOfPlace)
      error(algo, "inplace and outofplace are both 0: the plan could never be used");
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    cp.minBytes = static_cast<uint64_t>(intAttr(algo, "minBytes", 0, kMax));
    cp.maxBytes = static_cast<uint64_t>(intAttr(algo, "maxBytes", 0, kMax));
    if (cp.maxBytes != 0 && cp.maxBytes < cp.minBytes)
      error(algo, "maxBytes " + std::to_string(cp.maxBytes) + " is below minBytes " +
                      std::to_string(cp.minBytes));
    if (rooted(cp.coll) && algo.attribute("root"))
      cp.root = static_cast<int32_t>(intAttr(algo, "root", 0, cp.nranks - 1));
    // Buffers hold at most the whole loop buffer of every rank (gather's root: ngpus loops).
    maxBufferChunks_ = cp.chunksPerLoop * static_cast<uint64_t>(cp.nranks);

    cp.programs.resize(cp.nranks);
    std::vector<ptrdiff_t> seen(cp.nranks, -1);
    int gpus = 0;
    for (pugi::xml_node g : algo.children()) {
      if (g.type() != pugi::node_element) continue;
      countElement(g);
      if (std::string_view(g.name()) != "gpu")
        error(g, "unexpected element inside <algo> (expected <gpu>)");
      int id = static_cast<int>(intAttr(g, "id", 0, cp.nranks - 1));
      if (seen[id] >= 0)
        error(g, "duplicate gpu id " + std::to_string(id) + " (first at line " +
                     std::to_string(lineOf(seen[id])) + ")");
      seen[id] = g.offset_debug();
      ++gpus;
      cp.programs[id] = readGpu(g, id, cp.nranks);
    }
    if (gpus != cp.nranks) {
      int missing = static_cast<int>(std::find(seen.begin(), seen.end(), -1) - seen.begin());
      error(algo, "ngpus is " + std::to_string(cp.nranks) + " but there are " +
                      std::to_string(gpus) + " <gpu> elements (gpu id " + std::to_string(missing) +
                      " is missing)");
    }
    return cp;
  }

  ChunkProgram readGpu(pugi::xml_node g, int rank, int nranks) {
    ChunkProgram prog;
    const int64_t maxChunks = static_cast<int64_t>(maxBufferChunks_);
    prog.inputChunks = static_cast<uint64_t>(intAttr(g, "i_chunks", 0, maxChunks));
    prog.outputChunks = static_cast<uint64_t>(intAttr(g, "o_chunks", 0, maxChunks));
    prog.scratchChunks = static_cast<uint64_t>(intAttr(g, "s_chunks", 0, maxChunks));
    const uint64_t sizes[3] = {prog.inputChunks, prog.outputChunks, prog.scratchChunks};

    std::vector<RawLane> lanes;
    for (pugi::xml_node t : g.children()) {
      if (t.type() != pugi::node_element) continue;
      countElement(t);
      if (std::string_view(t.name()) != "tb")
        error(t, "unexpected element inside <gpu> (expected <tb>)");
      int id = static_cast<int>(intAttr(t, "id", 0, lim_.maxLanesPerRank - 1));
      if (id >= static_cast<int>(lanes.size())) lanes.resize(id + 1);
      RawLane& lane = lanes[id];
      if (lane.present)
        error(t, "duplicate tb id " + std::to_string(id) + " (first at line " +
                     std::to_string(lineOf(lane.offset)) + ")");
      lane.present = true;
      lane.offset = t.offset_debug();
      lane.send = static_cast<int>(intAttr(t, "send", -1, nranks - 1));
      lane.recv = static_cast<int>(intAttr(t, "recv", -1, nranks - 1));
      if (lane.send == rank || lane.recv == rank)
        error(t, "a tb of gpu " + std::to_string(rank) + " cannot send to or receive from itself");
      lane.channel = static_cast<int32_t>(intAttr(t, "chan", 0, nchannels_ - 1));
      readSteps(t, lane, sizes);
    }
    for (size_t l = 0; l < lanes.size(); ++l)
      if (!lanes[l].present)
        error(g, "tb ids are not dense: tb " + std::to_string(l) + " is missing");
    resolveDependencies(g, lanes);
    prog.lanes = foldNops(lanes);
    checkCycles(g, lanes, prog.lanes);
    return prog;
  }

  void readSteps(pugi::xml_node t, RawLane& lane, const uint64_t sizes[3]) {
    constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
    for (pugi::xml_node s : t.children()) {
      if (s.type() != pugi::node_element) continue;
      countElement(s);
      if (std::string_view(s.name()) != "step")
        error(s, "unexpected element inside <tb> (expected <step>)");
      if (static_cast<int>(lane.steps.size()) >= lim_.maxStepsPerLane)
        error(s, "more than " + std::to_string(lim_.maxStepsPerLane) + " steps in one tb");
      const int64_t index = intAttr(s, "s", 0, kMaxInt);
      if (index != static_cast<int64_t>(lane.steps.size()))
        error(s, "step s=" + std::to_string(index) +
                     " is out of order (expected s=" + std::to_string(lane.steps.size()) + ")");
      RawStep raw;
      raw.offset = s.offset_debug();
      Step& st = raw.step;
      std::string type = strAttr(s, "type");
      bool known = false;
      for (const OpType& k : kOpTypes)
        if (type == k.name) {
          st.op = k.op;
          known = true;
        }
      if (!known) error(s, "unknown step type \"" + type.substr(0, 40) + "\"");
      const uint16_t srcBuf = bufferAttr(s, "srcbuf"), dstBuf = bufferAttr(s, "dstbuf");
      const int64_t srcOff = intAttr(s, "srcoff", -1, kMaxInt);
      const int64_t dstOff = intAttr(s, "dstoff", -1, kMaxInt);
      const int64_t cnt = intAttr(s, "cnt", 0, kMaxInt);
      const int64_t depid = intAttr(s, "depid", -1, lim_.maxLanesPerRank - 1);
      const int64_t deps = intAttr(s, "deps", -1, kMaxInt);
      (void)intAttr(s, "hasdep", 0, 1);  // derived again on export; the executor needs no flag
      if (depid >= 0) {
        if (deps < 0) error(s, "depid=" + std::to_string(depid) + " needs a step index in deps");
        raw.depLane = static_cast<int>(depid);
        raw.depStep = static_cast<int>(deps);
      }
      if (opSends(st.op)) {
        if (lane.send < 0)
          error(s, "type " + type + " sends but the tb has no send peer (send=-1)");
        st.sendPeer = lane.send;
      }
      if (opRecvs(st.op)) {
        if (lane.recv < 0)
          error(s, "type " + type + " receives but the tb has no receive peer (recv=-1)");
        st.recvPeer = lane.recv;
      }
      if (st.op != Op::kNop) st.count = static_cast<uint64_t>(cnt);
      auto operand = [&](const char* what, uint16_t buf, int64_t off) {
        if (off < 0) error(s, std::string(what) + "off=-1 on a step that uses its " + what);
        if (static_cast<uint64_t>(off) + st.count > sizes[buf])
          error(s, std::string(what) + " chunks [" + std::to_string(off) + ", " +
                       std::to_string(off + cnt) + ") are outside buffer " + bufferLetter(buf) +
                       " of " + std::to_string(sizes[buf]) + " chunks");
        return Ref{buf, static_cast<uint64_t>(off)};
      };
      if (opReadsSrc(st.op)) st.src = operand("src", srcBuf, srcOff);
      if (opWritesDst(st.op)) st.dst = operand("dst", dstBuf, dstOff);
      if (st.op == Op::kRecvReduceCopy && st.src.buffer == st.dst.buffer &&
          st.src.offset == st.dst.offset) {
        st.op = Op::kRecvReduce;
        st.src = Ref{};
      }
      lane.steps.push_back(std::move(raw));
    }
  }

  void resolveDependencies(pugi::xml_node g, const std::vector<RawLane>& lanes) {
    for (size_t l = 0; l < lanes.size(); ++l)
      for (size_t i = 0; i < lanes[l].steps.size(); ++i) {
        const RawStep& r = lanes[l].steps[i];
        if (r.depLane < 0) continue;
        if (r.depLane >= static_cast<int>(lanes.size()) ||
            r.depStep >= static_cast<int>(lanes[r.depLane].steps.size()))
          errorAt(r.offset, stepWhere(g, l, i),
                  "depends on tb " + std::to_string(r.depLane) + " step " +
                      std::to_string(r.depStep) + ", which does not exist");
      }
  }

  std::string stepWhere(pugi::xml_node g, size_t lane, size_t step) const {
    return describe(g) + " <tb id=\"" + std::to_string(lane) + "\"> <step s=\"" +
           std::to_string(step) + "\">";
  }

  // Nops no step depends on move their dependency into the next step of their tb.
  std::vector<Lane> foldNops(std::vector<RawLane>& raw) {
    std::vector<std::vector<char>> needed(raw.size());
    for (size_t l = 0; l < raw.size(); ++l) needed[l].assign(raw[l].steps.size(), 0);
    for (const RawLane& lane : raw)
      for (const RawStep& r : lane.steps)
        if (r.depLane >= 0) needed[r.depLane][r.depStep] = 1;
    std::vector<std::vector<int>> index(raw.size());  // file step -> plan step (-1: folded)
    std::vector<Lane> lanes(raw.size());
    for (size_t l = 0; l < raw.size(); ++l) {
      lanes[l].channel = raw[l].channel;
      index[l].assign(raw[l].steps.size(), -1);
      std::vector<std::pair<int, int>> pending;
      std::vector<RawStep> kept;
      for (size_t i = 0; i < raw[l].steps.size(); ++i) {
        RawStep& r = raw[l].steps[i];
        if (r.depLane >= 0) pending.push_back({r.depLane, r.depStep});
        bool last = i + 1 == raw[l].steps.size();
        if (r.step.op == Op::kNop && !needed[l][i] && !last) continue;
        for (auto [dl, ds] : pending) r.step.deps.push_back(StepRef{dl, ds});
        pending.clear();
        index[l][i] = static_cast<int>(kept.size());
        kept.push_back(std::move(r));
      }
      raw[l].steps = std::move(kept);
    }
    for (size_t l = 0; l < raw.size(); ++l) {
      for (RawStep& r : raw[l].steps) {
        for (StepRef& d : r.step.deps) d.step = index[d.lane][d.step];
        lanes[l].steps.push_back(r.step);
      }
    }
    return lanes;
  }

  // Program order plus dependencies must form no cycle (the executor would hang).
  void checkCycles(pugi::xml_node g, const std::vector<RawLane>& raw,
                   const std::vector<Lane>& lanes) {
    std::vector<size_t> start;
    size_t total = 0;
    for (const Lane& lane : lanes) {
      start.push_back(total);
      total += lane.steps.size();
    }
    std::vector<int> indeg(total, 0);
    std::vector<std::vector<size_t>> succ(total);
    for (size_t l = 0; l < lanes.size(); ++l)
      for (size_t s = 0; s < lanes[l].steps.size(); ++s) {
        size_t id = start[l] + s;
        if (s > 0) {
          succ[id - 1].push_back(id);
          ++indeg[id];
        }
        for (const StepRef& d : lanes[l].steps[s].deps) {
          succ[start[d.lane] + d.step].push_back(id);
          ++indeg[id];
        }
      }
    std::vector<size_t> ready;
    for (size_t i = 0; i < total; ++i)
      if (indeg[i] == 0) ready.push_back(i);
    size_t done = 0;
    while (!ready.empty()) {
      size_t i = ready.back();
      ready.pop_back();
      ++done;
      for (size_t j : succ[i])
        if (--indeg[j] == 0) ready.push_back(j);
    }
    if (done == total) return;
    for (size_t l = 0; l < lanes.size(); ++l)
      for (size_t s = 0; s < lanes[l].steps.size(); ++s)
        if (indeg[start[l] + s] > 0) {
          const Step& st = lanes[l].steps[s];
          std::string deps;
          for (const StepRef& d : st.deps)
            deps += " tb " + std::to_string(d.lane) + " (plan step " + std::to_string(d.step) + ")";
          errorAt(raw[l].steps[s].offset, describe(g) + " <tb id=\"" + std::to_string(l) + "\">",
                  "dependency cycle through this step (it waits for" +
                      (deps.empty() ? std::string(" earlier steps of its tb") : deps) + ")");
        }
  }

  std::string_view text_;
  std::string source_;
  MscclLimits lim_;
  std::vector<size_t> lineStarts_{0};
  size_t elements_ = 0;
  int nchannels_ = 1;
  uint64_t maxBufferChunks_ = 0;
};

}  // namespace

ChunkPlan importMsccl(std::string_view xml, const std::string& source, const MscclLimits& limits) {
  return Importer(xml, source, limits).run();
}

ChunkPlan importMscclFile(const std::string& path, const MscclLimits& limits) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(Status::kInvalidArgument, sysError(path, errno));
  if (!S_ISREG(st.st_mode)) fail(Status::kInvalidArgument, path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.maxBytes)
    fail(Status::kInvalidArgument, path + ": " + std::to_string(st.st_size) +
                                       " bytes exceeds the " + std::to_string(limits.maxBytes) +
                                       "-byte limit for MSCCL XML");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::kInvalidArgument, sysError(path, errno));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return importMsccl(text, path, limits);
}

}  // namespace weft::plan

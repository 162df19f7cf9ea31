// exportMsccl: a ChunkPlan written as MSCCL's old format, checked by reading it back (see
// msccl_xml.h).
#include <algorithm>
#include <sstream>
#include <vector>

#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/msccl_xml_internal.h"

namespace weft::plan {

namespace {

using detail::bufferLetter;
using detail::kCollectives;
using detail::mscclType;
using detail::rooted;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

[[noreturn]] void cannotExport(const ChunkPlan& p, const std::string& why) {
  fail(Status::kInvalidArgument, "plan '" + p.name + "' cannot be written as MSCCL XML: " + why);
}

}  // namespace

std::string exportMsccl(const ChunkPlan& p) {
  const char* coll = nullptr;
  for (const auto& [n, c] : kCollectives)
    if (c == p.coll) coll = n;
  if (!coll) cannotExport(p, std::string("MSCCL has no collective ") + collectiveName(p.coll));
  if (static_cast<int>(p.programs.size()) != p.nranks)
    cannotExport(p, std::to_string(p.programs.size()) + " programs for " +
                        std::to_string(p.nranks) + " ranks");
  int32_t maxChannel = 0;
  for (const ChunkProgram& prog : p.programs)
    for (const Lane& lane : prog.lanes) {
      maxChannel = std::max(maxChannel, lane.channel);
      if (sendChannelOf(lane) != lane.channel)
        cannotExport(p, "a lane sends on channel " + std::to_string(lane.sendChannel) +
                            " and receives on " + std::to_string(lane.channel) +
                            " (MSCCL thread blocks have one channel)");
    }

  std::ostringstream out;
  out << "<algo name=\"" << escape(p.name) << "\" proto=\"" << escape(p.proto) << "\" nchannels=\""
      << maxChannel + 1 << "\" nchunksperloop=\"" << p.chunksPerLoop << "\" ngpus=\"" << p.nranks
      << "\" coll=\"" << coll << "\" inplace=\"" << p.inPlace << "\" outofplace=\"" << p.outOfPlace
      << "\" minBytes=\"" << p.minBytes << "\" maxBytes=\"" << p.maxBytes << "\"";
  if (rooted(p.coll)) out << " root=\"" << p.root << "\"";
  out << ">\n";
  for (int r = 0; r < p.nranks; ++r) {
    const ChunkProgram& prog = p.programs[r];
    out << "  <gpu id=\"" << r << "\" i_chunks=\"" << prog.inputChunks << "\" o_chunks=\""
        << prog.outputChunks << "\" s_chunks=\"" << prog.scratchChunks << "\">\n";
    const size_t nl = prog.lanes.size();
    // File index of each step (extra dependencies become nops in front of it) and whether a
    // step of another lane waits for it.
    std::vector<std::vector<size_t>> fileIndex(nl);
    std::vector<std::vector<char>> waitedOn(nl);
    for (size_t l = 0; l < nl; ++l) {
      size_t at = 0;
      for (const Step& s : prog.lanes[l].steps) {
        at += s.deps.size() > 1 ? s.deps.size() - 1 : 0;
        fileIndex[l].push_back(at++);
      }
      waitedOn[l].assign(prog.lanes[l].steps.size(), 0);
    }
    for (size_t l = 0; l < nl; ++l)
      for (const Step& s : prog.lanes[l].steps)
        for (const StepRef& d : s.deps) {
          if (d.lane < 0 || d.lane >= static_cast<int>(nl) || d.step < 0 ||
              d.step >= static_cast<int>(prog.lanes[d.lane].steps.size()))
            cannotExport(p, "rank " + std::to_string(r) + " lane " + std::to_string(l) +
                                " depends on missing step " + std::to_string(d.lane) + "." +
                                std::to_string(d.step));
          waitedOn[d.lane][d.step] = 1;
        }
    for (size_t l = 0; l < nl; ++l) {
      const Lane& lane = prog.lanes[l];
      int send = -1, recv = -1;
      for (const Step& s : lane.steps) {
        if (opSends(s.op)) {
          if (send >= 0 && send != s.sendPeer)
            cannotExport(p, "rank " + std::to_string(r) + " lane " + std::to_string(l) +
                                " sends to ranks " + std::to_string(send) + " and " +
                                std::to_string(s.sendPeer) + " (a tb has one send peer)");
          send = s.sendPeer;
        }
        if (opRecvs(s.op)) {
          if (recv >= 0 && recv != s.recvPeer)
            cannotExport(p, "rank " + std::to_string(r) + " lane " + std::to_string(l) +
                                " receives from ranks " + std::to_string(recv) + " and " +
                                std::to_string(s.recvPeer) + " (a tb has one receive peer)");
          recv = s.recvPeer;
        }
      }
      out << "    <tb id=\"" << l << "\" send=\"" << send << "\" recv=\"" << recv << "\" chan=\""
          << lane.channel << "\">\n";
      auto operand = [&](const char* prefix, const Ref* r, const char* unused) {
        if (!r) return std::string(prefix) + "buf=\"" + unused + "\" " + prefix + "off=\"-1\"";
        const char* b = bufferLetter(r->buffer);
        if (!b) cannotExport(p, "buffer " + std::to_string(r->buffer) + " is not i, o or s");
        return std::string(prefix) + "buf=\"" + b + "\" " + prefix + "off=\"" +
               std::to_string(r->offset) + "\"";
      };
      size_t index = 0;
      auto step = [&](const char* type, const Ref* src, const Ref* dst, uint64_t cnt,
                      const StepRef* dep, bool hasdep) {
        out << "      <step s=\"" << index++ << "\" type=\"" << type << "\" "
            << operand("src", src, "i") << " " << operand("dst", dst, "o") << " cnt=\"" << cnt
            << "\" depid=\"" << (dep ? dep->lane : -1) << "\" deps=\""
            << (dep ? static_cast<int64_t>(fileIndex[dep->lane][dep->step]) : -1) << "\" hasdep=\""
            << (hasdep ? 1 : 0) << "\"/>\n";
      };
      for (size_t i = 0; i < lane.steps.size(); ++i) {
        const Step& s = lane.steps[i];
        for (size_t k = 0; k + 1 < s.deps.size(); ++k)
          step("nop", nullptr, nullptr, 0, &s.deps[k], false);
        const char* type = mscclType(s.op);
        if (!type) cannotExport(p, "unknown op " + std::to_string(static_cast<int>(s.op)));
        // kRecvReduce (dst = dst op incoming) is rrc with src = dst.
        const Ref* src = opReadsSrc(s.op) ? &s.src : s.op == Op::kRecvReduce ? &s.dst : nullptr;
        const Ref* dst = opWritesDst(s.op) ? &s.dst : nullptr;
        step(type, src, dst, s.op == Op::kNop ? 0 : s.count,
             s.deps.empty() ? nullptr : &s.deps.back(), waitedOn[l][i] != 0);
      }
      out << "    </tb>\n";
    }
    out << "  </gpu>\n";
  }
  out << "</algo>\n";
  std::string xml = out.str();
  // Only write what reads back: the importer's checks are the definition of a valid file.
  MscclLimits generous;
  generous.maxBytes = std::max<size_t>(generous.maxBytes, xml.size());
  try {
    (void)importMsccl(xml, "exported plan", generous);
  } catch (const Error& e) {
    cannotExport(p, e.what());
  }
  return xml;
}

}  // namespace weft::plan

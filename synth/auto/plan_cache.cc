#include "synth/auto/plan_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/common/host_id.h"
#include "src/plan/msccl_xml.h"

namespace weft::synth {
namespace {

constexpr const char* kFormat = "weft-synth-selection 1";

// mkdir -p; false when a component cannot be made.
bool makeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at < path.size() && path[at] != '/') continue;
    const std::string part = path.substr(0, at);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool readText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

// Writes `text` to a unique temporary name in the same directory, then renames it over `path`.
bool writeAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(std::hash<std::string>()(text) & 0xffffff);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// The entry in `dir`, or false (and *why) when it is missing or does not read back.
bool readEntry(const std::string& dir, std::vector<SelectedPlan>* plans, std::string* why) {
  std::string index;
  if (!readText(dir + "/index", &index)) {
    *why = "no index";
    return false;
  }
  std::istringstream lines(index);
  std::string line;
  if (!std::getline(lines, line) || line != kFormat) {
    *why = "index of another format";
    return false;
  }
  bool ended = false;
  while (std::getline(lines, line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    std::istringstream fields(line);
    SelectedPlan p;
    std::string file;
    if (!(fields >> p.method >> p.predictedUs >> p.ringUs >> file) ||
        file.find('/') != std::string::npos) {
      *why = "malformed index line '" + line + "'";
      return false;
    }
    std::string xml;
    if (!readText(dir + "/" + file, &xml)) {
      *why = "missing plan " + file;
      return false;
    }
    try {
      p.plan = plan::importMsccl(xml, dir + "/" + file);
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
    plans->push_back(std::move(p));
  }
  if (!ended) {
    *why = "truncated index";
    return false;
  }
  return true;
}

}  // namespace

std::string selectionKey(const Fabric& fabric, const SelectionOptions& options) {
  std::ostringstream text;
  text << kFormat << "\n" << fabric.describe();
  for (int a = 0; a < fabric.nranks; ++a)
    for (int b = 0; b < fabric.nranks; ++b) {
      text << "route " << a << " " << b << ":";
      for (int l : fabric.routes[a][b]) text << " " << l;
      text << "\n";
    }
  text << "colls";
  for (auto c : options.colls) text << " " << static_cast<int>(c);
  text << "\nmethods";
  for (auto m : options.methods) text << " " << methodName(m);
  text << "\nsizes";
  for (auto s : options.sizes) text << " " << s;
  text << "\ngain " << options.minGain << " slice " << options.sim.sliceBytes << " slots "
       << options.sim.fifoSlots << " overhead " << options.sim.stepOverheadUs << " local "
       << options.sim.localBw << "\n";
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(fnv1a(text.str())));
  return hex;
}

CachedSelection cachedSelectPlans(const Fabric& fabric, const SelectionOptions& options,
                                  const std::string& root, bool rebuild) {
  CachedSelection out;
  if (!root.empty()) {
    out.dir = root + "/" + selectionKey(fabric, options);
    if (!rebuild) {
      std::string why;
      std::vector<SelectedPlan> plans;
      if (readEntry(out.dir, &plans, &why)) {
        out.plans = std::move(plans);
        out.fromCache = true;
        return out;
      }
      if (why != "no index") out.notes.push_back("cache entry " + out.dir + " ignored: " + why);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  out.plans = selectPlans(fabric, options, &out.notes);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (root.empty()) return out;
  for (const std::string& note : out.notes)
    if (note.rfind("time budget", 0) == 0) return out;  // partial: synthesize again next time
  if (!makeDirs(out.dir)) {
    out.notes.push_back("cannot create " + out.dir);
    return out;
  }
  std::ostringstream index;
  index.precision(17);
  index << kFormat << "\n";
  for (size_t i = 0; i < out.plans.size(); ++i) {
    const SelectedPlan& p = out.plans[i];
    const std::string file = std::to_string(i) + "-" + p.plan.name + ".xml";
    if (!writeAtomically(out.dir + "/" + file, plan::exportMsccl(p.plan))) {
      out.notes.push_back("cannot write " + out.dir + "/" + file);
      return out;
    }
    index << p.method << " " << p.predictedUs << " " << p.ringUs << " " << file << "\n";
  }
  index << "end\n";
  if (!writeAtomically(out.dir + "/index", index.str()))
    out.notes.push_back("cannot write " + out.dir + "/index");
  return out;
}

}  // namespace weft::synth

#include "src/select/plan_library.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/verifier.h"

namespace weft::select {

namespace {

// Verification at load walks every element of every rank's buffers: bound the work.
constexpr uint64_t kMaxVerifyElements = 1u << 22;

uint64_t smallestCount(const plan::ChunkPlan& p) {
  const uint64_t mult = plan::sizeMultiplier(p.coll, p.nranks);
  return p.chunksPerLoop / std::gcd(p.chunksPerLoop, mult);
}

uint64_t maxStepChunks(const plan::ChunkPlan& p) {
  uint64_t m = 0;
  for (const auto& prog : p.programs)
    for (const auto& lane : prog.lanes)
      for (const auto& s : lane.steps) m = std::max(m, s.count);
  return m;
}

std::string windowText(const plan::ChunkPlan& p) {
  std::ostringstream o;
  o << plan::collectiveName(p.coll) << ", " << p.nranks << " ranks, " << p.minBytes << "-";
  if (p.maxBytes)
    o << p.maxBytes;
  else
    o << "any";
  o << " bytes, "
    << (p.inPlace && p.outOfPlace ? "in and out of place"
        : runsOnOutput(p)         ? "in place, run on the output"
        : p.inPlace               ? "in place only"
                                  : "out of place only");
  return o.str();
}

// How a plan copes with messages larger than a FIFO slot (see plan_library.h).
const char* sizeNote(bool streams, bool pieces) {
  if (streams) return "";
  if (pieces) return "; runs in pieces where its messages exceed a FIFO slot";
  return "; messages up to one FIFO slot (its pieces fail verification)";
}

std::vector<std::string> splitDirs(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream s(list);
  std::string d;
  while (std::getline(s, d, ':'))
    if (!d.empty()) out.push_back(d);
  return out;
}

// *.xml regular files of a directory, sorted; `why` says why the directory could not be read.
std::vector<std::string> xmlFiles(const std::string& dir, std::string* why) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    *why = sysError("cannot open directory " + dir, errno);
    return out;
  }
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".xml") != 0) continue;
    out.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

struct CachedFile {
  off_t size = -1;
  int64_t mtimeNs = -1;
  std::shared_ptr<const plan::ChunkPlan> plan;
  std::string error;
  bool streams = false;
  bool pieces = false;
};

std::mutex cacheMu;
std::map<std::string, CachedFile>& fileCache() {
  static std::map<std::string, CachedFile> cache;
  return cache;
}

// The checked plan of a file, read at most once per process and version of the file.
CachedFile loadFile(const std::string& path) {
  struct stat st;
  CachedFile fresh;
  if (::stat(path.c_str(), &st) != 0) {
    fresh.error = sysError("stat " + path, errno);
    return fresh;
  }
  fresh.size = st.st_size;
  fresh.mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  {
    std::lock_guard<std::mutex> lock(cacheMu);
    auto it = fileCache().find(path);
    if (it != fileCache().end() && it->second.size == fresh.size &&
        it->second.mtimeNs == fresh.mtimeNs)
      return it->second;
  }
  try {
    plan::ChunkPlan p = plan::importMscclFile(path);
    PlanCheck check = checkLibraryPlan(p, true);
    fresh.error = check.error;
    fresh.streams = check.streams;
    fresh.pieces = check.pieces;
    if (fresh.error.empty()) fresh.plan = std::make_shared<const plan::ChunkPlan>(std::move(p));
  } catch (const Error& e) {
    fresh.error = e.what();
  }
  if (fresh.plan)
    WEFT_INFO(INIT, "plan library: loaded %s: msccl plan '%s' (%s%s)", path.c_str(),
              fresh.plan->name.c_str(), windowText(*fresh.plan).c_str(),
              sizeNote(fresh.streams, fresh.pieces));
  else
    WEFT_WARN(INIT, "plan library: rejected %s: %s", path.c_str(), fresh.error.c_str());
  std::lock_guard<std::mutex> lock(cacheMu);
  fileCache()[path] = fresh;
  return fresh;
}

}  // namespace

bool runsOnOutput(const plan::ChunkPlan& p) {
  return !p.outOfPlace &&
         (p.coll == plan::Collective::kAllReduce || p.coll == plan::Collective::kAllGather);
}

// instantiate()'s plan, or for in-place-only allreduce / allgather plans the form that runs on
// the output buffer.
static plan::Plan onOutputIfNeeded(const plan::ChunkPlan& cp, plan::Plan p, uint64_t count) {
  if (!runsOnOutput(cp)) return p;
  for (int r = 0; r < p.spec.nranks; ++r) {
    plan::Program& prog = p.programs[r];
    // Where an in-place call keeps this rank's input inside the output.
    const uint64_t slot = cp.coll == plan::Collective::kAllGather ? r * count : 0;
    auto toOutput = [&](plan::Ref& ref) {
      if (ref.buffer == plan::kInput) ref = plan::Ref{plan::kOutput, ref.offset + slot};
    };
    for (plan::Lane& lane : prog.lanes)
      for (plan::Step& st : lane.steps) {
        if (plan::opReadsSrc(st.op)) toOutput(st.src);
        if (plan::opWritesDst(st.op)) toOutput(st.dst);
      }
    plan::Step copy;
    copy.op = plan::Op::kCopy;
    copy.src = plan::Ref{plan::kInput, 0};
    copy.dst = plan::Ref{plan::kOutput, slot};
    copy.count = plan::bufferSizes(p.spec, r).input;
    const int32_t copyLane = static_cast<int32_t>(prog.lanes.size());
    for (plan::Lane& lane : prog.lanes)
      if (!lane.steps.empty()) lane.steps.front().deps.push_back(plan::StepRef{copyLane, 0});
    prog.lanes.push_back(plan::Lane{0, {copy}});
  }
  p.inPlaceSafe = p.outOfPlaceSafe = true;
  return p;
}

plan::Plan instantiateLibraryPlan(const plan::ChunkPlan& cp, uint64_t count, uint32_t elemSize,
                                  const std::string& algorithm, uint64_t pieceBytes,
                                  plan::PieceShape* shape) {
  plan::Plan p = onOutputIfNeeded(cp, plan::instantiate(cp, count, elemSize, algorithm), count);
  if (shape) *shape = plan::PieceShape{};
  if (pieceBytes == 0) return p;
  plan::PieceOptions options;
  options.maxMessageElems = std::max<uint64_t>(1, pieceBytes / std::max<uint32_t>(1, elemSize));
  // Parts of a chunk start on 64-byte boundaries, as whole slots do.
  options.alignElems = std::max<uint64_t>(1, 64 / std::max<uint32_t>(1, elemSize));
  const plan::PieceShape cut = plan::pieceShape(p, options);
  if (shape) *shape = cut;
  return cut.unitElems ? plan::cutIntoPieces(p, options) : p;
}

PlanCheck checkLibraryPlan(const plan::ChunkPlan& p, bool verify) {
  PlanCheck out;
  if (p.nranks < 1 || static_cast<int>(p.programs.size()) != p.nranks) {
    out.error = "plan has " + std::to_string(p.programs.size()) + " programs for " +
                std::to_string(p.nranks) + " ranks";
    return out;
  }
  if (!p.inPlace && !p.outOfPlace) {
    out.error = "plan is usable neither in place nor out of place";
    return out;
  }
  if (p.chunksPerLoop == 0) {
    out.error = "chunksPerLoop is 0";
    return out;
  }
  const uint64_t count = smallestCount(p);
  auto elementsAt = [&](const plan::Plan& inst) {
    uint64_t elements = 0;
    for (int r = 0; r < p.nranks; ++r) {
      const plan::BufferSizes b = plan::bufferSizes(inst.spec, r);
      elements += b.input + b.output + inst.programs[r].scratchElems;
    }
    return elements;
  };
  try {
    plan::Plan inst = instantiateLibraryPlan(p, count, 4);
    if (!verify) return out;
    const uint64_t elements = elementsAt(inst);
    if (elements > kMaxVerifyElements) {
      out.error = "too large to verify at load (" + std::to_string(elements) +
                  " buffer elements at its smallest count " + std::to_string(count) + ")";
      return out;
    }
    plan::verify(inst);
  } catch (const Error& e) {
    out.error = std::string("at count ") + std::to_string(count) + ": " + e.what();
    return out;
  }
  // Messages longer than the FIFO: each chunk 3 and 5 slices of one chunk-at-smallest-count.
  const uint64_t chunk = plan::chunkElems(p, count);
  out.streams = true;
  for (uint64_t k : {3, 5}) {
    plan::Plan inst = instantiateLibraryPlan(p, k * count, 4);
    plan::VerifyOptions streaming;
    streaming.sliceElems = chunk;
    streaming.fifoSlots = 2;
    if (elementsAt(inst) > kMaxVerifyElements || !plan::verifyMessage(inst, streaming).empty())
      out.streams = false;
  }
  if (out.streams) return out;
  // In pieces, each message one slot of a two-slot FIFO: chunks of 3 slots in 3 pieces, and of 5
  // slots cut into pieces of 2 (uneven parts).
  out.pieces = true;
  for (auto [k, slot] : {std::pair<uint64_t, uint64_t>{3, 1}, {5, 2}}) {
    plan::Plan inst = instantiateLibraryPlan(p, k * count, 4, "", 4 * slot * chunk);
    plan::VerifyOptions pieces;
    pieces.sliceElems = slot * chunk;
    pieces.fifoSlots = 2;
    if (elementsAt(inst) > kMaxVerifyElements || !plan::verifyMessage(inst, pieces).empty())
      out.pieces = false;
  }
  return out;
}

const LibraryPlan& PlanLibrary::add(plan::ChunkPlan plan, std::string source, double predictedUs,
                                    bool verify) {
  PlanCheck check = checkLibraryPlan(plan, verify);
  if (!check.error.empty())
    fail(Status::kInvalidArgument, "plan library: " + source + ": " + check.error);
  return addChecked(std::make_shared<const plan::ChunkPlan>(std::move(plan)), std::move(source),
                    predictedUs, check.streams, check.pieces);
}

const LibraryPlan& PlanLibrary::addChecked(std::shared_ptr<const plan::ChunkPlan> plan,
                                           std::string source, double predictedUs, bool streams,
                                           bool pieces) {
  LibraryPlan e;
  e.streams = streams;
  e.pieces = pieces;
  e.maxStepChunks = maxStepChunks(*plan);
  e.plan = std::move(plan);
  e.source = std::move(source);
  e.predictedUs = predictedUs > 0 ? predictedUs : 0;
  e.id = nextId_++;
  plans_.push_back(std::move(e));
  return plans_.back();
}

const LibraryPlan* PlanLibrary::match(const LibraryQuery& q) const {
  const LibraryPlan* best = nullptr;
  for (const LibraryPlan& e : plans_) {
    const plan::ChunkPlan& p = *e.plan;
    if (p.coll != q.coll || p.nranks != q.nranks) continue;
    if ((p.coll == plan::Collective::kBroadcast || p.coll == plan::Collective::kReduce ||
         p.coll == plan::Collective::kGather || p.coll == plan::Collective::kScatter) &&
        p.root != q.root)
      continue;
    if (!runsOnOutput(p)) {
      if (q.inPlace ? !p.inPlace : !p.outOfPlace) continue;
      if (!p.outOfPlace && q.scalesInput) continue;
    }
    const uint64_t chunk = plan::chunkElems(p, q.count);
    if (chunk == 0) continue;
    const uint64_t bytes = plan::sizeMultiplier(p.coll, p.nranks) * q.count * q.elemSize;
    if (bytes < p.minBytes || (p.maxBytes != 0 && bytes > p.maxBytes)) continue;
    if (!e.streams && !e.pieces && e.maxStepChunks * chunk * q.elemSize > q.slotBytes) continue;
    if (!best) {
      best = &e;
    } else if (best->predictedUs > 0 && (e.predictedUs == 0 || e.predictedUs < best->predictedUs)) {
      best = &e;
    }
  }
  return best;
}

std::string PlanLibrary::describe() const {
  std::ostringstream o;
  o << "plan library: " << plans_.size() << " plans";
  for (const LibraryPlan& e : plans_) {
    o << "\n  msccl '" << e.plan->name << "' (" << windowText(*e.plan) << ") from " << e.source;
    if (e.predictedUs > 0) o << ", predicted " << e.predictedUs << " us";
    o << sizeNote(e.streams, e.pieces);
  }
  return o.str();
}

std::string PlanLibrary::windows() const {
  std::ostringstream o;
  for (const LibraryPlan& e : plans_)
    o << (o.tellp() > 0 ? "; " : "") << "'" << e.plan->name << "' (" << windowText(*e.plan) << ")";
  return plans_.empty() ? "none" : o.str();
}

std::shared_ptr<const PlanLibrary> libraryFromDirectories(const std::string& dirs) {
  auto lib = std::make_shared<PlanLibrary>();
  if (dirs.empty()) return lib;
  // The ranks of one process initialise together: one of them reads, the others use its result.
  static std::mutex loadMu;
  std::lock_guard<std::mutex> loading(loadMu);
  for (const std::string& dir : splitDirs(dirs)) {
    std::string why;
    std::vector<std::string> files = xmlFiles(dir, &why);
    if (!why.empty()) {
      // Once per process and directory: every rank of every communicator looks again.
      static std::set<std::string> reported;
      std::lock_guard<std::mutex> lock(cacheMu);
      if (reported.insert(dir).second) WEFT_WARN(INIT, "plan library: %s (skipped)", why.c_str());
      continue;
    }
    for (const std::string& f : files) {
      CachedFile c = loadFile(f);
      if (c.plan) lib->addChecked(c.plan, f, 0, c.streams, c.pieces);
    }
  }
  return lib;
}

namespace {
std::mutex processMu;
PlanLibrary& processPlans() {
  static PlanLibrary lib;
  return lib;
}
}  // namespace

void addProcessPlan(plan::ChunkPlan plan, std::string source, double predictedUs) {
  PlanCheck check = checkLibraryPlan(plan, true);
  if (!check.error.empty())
    fail(Status::kInvalidArgument, "plan library: " + source + ": " + check.error);
  auto shared = std::make_shared<const plan::ChunkPlan>(std::move(plan));
  std::lock_guard<std::mutex> lock(processMu);
  processPlans().addChecked(std::move(shared), std::move(source), predictedUs, check.streams,
                            check.pieces);
}

void clearProcessPlans() {
  std::lock_guard<std::mutex> lock(processMu);
  processPlans() = PlanLibrary();
}

std::shared_ptr<const PlanLibrary> libraryFromEnvironment(const Tuning& tuning) {
  std::shared_ptr<const PlanLibrary> files = libraryFromDirectories(tuning.planDirs);
  std::lock_guard<std::mutex> lock(processMu);
  if (processPlans().empty()) return files;
  auto lib = std::make_shared<PlanLibrary>(*files);
  for (const LibraryPlan& e : processPlans().plans())
    lib->addChecked(e.plan, e.source, e.predictedUs, e.streams, e.pieces);
  return lib;
}

}  // namespace weft::select

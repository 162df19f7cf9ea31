// The built-in algorithms as the selector knows them, and the one table of measured corrections:
// where this machine's measurements overrule synth/model's closed forms (synth/model/alpha_beta.h).
// Every row names the perf/README.md benchmark-log entry that justifies it; no factor lives
// anywhere else in the selector.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "src/plan/plan.h"
#include "synth/model/alpha_beta.h"

namespace weft::select {

// The registry's built-in algorithms (algorithms/registry.h).
enum class Algorithm : uint8_t { kRing, kTree, kRhd, kDirect, kRsag, kFan, kHier };

struct AlgorithmInfo {
  Algorithm id;
  const char* name;  // the registry's and NCCL_ALGO's name
  synth::Shape shape;
  // The algorithm whose model and corrections it starts from: a fan broadcast is a direct one
  // whose root pushes a share of the data itself.
  Algorithm costedAs;
};

inline constexpr AlgorithmInfo kAlgorithms[] = {
    {Algorithm::kRing, "ring", synth::Shape::kRing, Algorithm::kRing},
    {Algorithm::kTree, "tree", synth::Shape::kTree, Algorithm::kTree},
    {Algorithm::kRhd, "rhd", synth::Shape::kHalvingDoubling, Algorithm::kRhd},
    {Algorithm::kDirect, "direct", synth::Shape::kDirect, Algorithm::kDirect},
    {Algorithm::kRsag, "rsag", synth::Shape::kReduceScatterAllGather, Algorithm::kRsag},
    {Algorithm::kFan, "fan", synth::Shape::kDirect, Algorithm::kDirect},
    {Algorithm::kHier, "hier", synth::Shape::kHierarchical, Algorithm::kHier},
};

const AlgorithmInfo& info(Algorithm a);
// The registry's and NCCL_ALGO's names meet the enum here, and nowhere else.
std::optional<Algorithm> algorithmNamed(std::string_view name);

// Where a row applies. Defaults: everywhere.
enum class Hosts : uint8_t { kAny, kOne, kSeveral };
enum class Cores : uint8_t { kAny, kShared, kOwn };  // kShared: a host's ranks take turns on cores
enum class RankCount : uint8_t { kAny, kPowerOf2, kNotPowerOf2 };
struct Window {
  Hosts hosts = Hosts::kAny;
  Cores cores = Cores::kAny;
  int minRanks = 1, maxRanks = 1 << 30;
  RankCount rankCount = RankCount::kAny;
  // Fan broadcasts: in place, the root's core carries at most half as many receivers as another
  // core (Selector::fanShare), and the ranks' buffers (bytes x ranks / 2, as WEFT_STREAM_BYTES
  // counts them) at least this many bytes, past what the caches keep. 0: no such condition.
  double fanStreamBytes = 0;
};

// What a row changes in the closed form's cost, steps x alpha + bytes x beta x scale:
//  kSteps: steps become value + perPeer x (n - 1) (override);
//  kBytes: bytes become value x the call's bytes (override);
//  kScale: scale times value, or (override) value instead of the model's own share;
//  kLocalScale: kScale for a hierarchical plan's hops inside hosts;
//  kTime:  the whole time times value, or (override) that factor instead of the factor rows'.
// Factor rows multiply; a matching override row replaces the model's term and every factor row's.
enum class Term : uint8_t { kSteps, kBytes, kScale, kLocalScale, kTime };

struct Correction {
  plan::Collective coll;
  Algorithm algorithm;
  Window window;
  Term term;
  bool override = false;
  double value = 1;
  double perPeer = 0;     // kSteps only: steps per peer (n - 1 of them)
  double perRound = 0;    // kSteps only: steps per round of a tree (synth::log2Rounds)
  const char* benchmark;  // a "### " heading of perf/README.md's benchmark log
};

inline constexpr const char* kRsagEntry = "rsag and one-host selection";
inline constexpr const char* kBroadcastChoiceEntry = "Broadcast choice on one host";
inline constexpr const char* kStraightRootEntry = "Direct broadcast root goes straight";
inline constexpr const char* kFanEntry = "Fan broadcast";
inline constexpr const char* kSelectorEntry = "The selector's corrections";

namespace detail {
using C = plan::Collective;
using A = Algorithm;
inline constexpr Window kOneHost{.hosts = Hosts::kOne};
inline constexpr Window kSeveralHosts{.hosts = Hosts::kSeveral};
}  // namespace detail

// Rules, and why (the measurements are in the named entries):
inline constexpr Correction kCorrections[] = {
    // On one host the ring's single lane and rhd's whole-block rounds wait for their peers step by
    // step, where rsag's sends and receives run on lanes of their own.
    {.coll = detail::C::kAllReduce,
     .algorithm = detail::A::kRing,
     .window = detail::kOneHost,
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kAllReduce,
     .algorithm = detail::A::kRhd,
     .window = detail::kOneHost,
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    // Three ranks on one host: the ring's allreduce beats rsag's, so rsag counts the ring's
    // traffic (4, 5 and 8 ranks go the model's way).
    {.coll = detail::C::kAllReduce,
     .algorithm = detail::A::kRsag,
     .window = {.hosts = Hosts::kOne, .minRanks = 3, .maxRanks = 3},
     .term = Term::kScale,
     .override = true,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    // A tree's inner ranks forward while they add.
    {.coll = detail::C::kAllReduce,
     .algorithm = detail::A::kTree,
     .window = {},
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    // A direct exchange issues its messages one after another: a quarter step per peer.
    {.coll = detail::C::kAllReduce,
     .algorithm = detail::A::kDirect,
     .window = {},
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.25,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduce,
     .algorithm = detail::A::kDirect,
     .window = {},
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.25,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kDirect,
     .window = detail::kSeveralHosts,
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.25,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kDirect,
     .window = {.hosts = Hosts::kOne, .maxRanks = 2},
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.25,
     .benchmark = kSelectorEntry},
    // The root sends (or receives and adds) every copy itself.
    {.coll = detail::C::kReduce,
     .algorithm = detail::A::kDirect,
     .window = {},
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kDirect,
     .window = detail::kSeveralHosts,
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kDirect,
     .window = {.hosts = Hosts::kOne, .maxRanks = 2},
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    // A broadcast on one host from 3 ranks: every receiver copies from the root's memory itself,
    // at once, where a chain's copies wait for each other.
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kDirect,
     .window = {.hosts = Hosts::kOne, .minRanks = 3},
     .term = Term::kBytes,
     .override = true,
     .value = 0.5,
     .benchmark = kRsagEntry},
    // Where 4 or more ranks take turns on the cores the root's copies go out in one straight call
    // and each receiver takes its turn once.
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kDirect,
     .window = {.hosts = Hosts::kOne, .cores = Cores::kShared, .minRanks = 4},
     .term = Term::kSteps,
     .override = true,
     .value = 1.5,
     .benchmark = kStraightRootEntry},
    // On one host small broadcasts go along a chain: calls follow each other through its hops and
    // each rank wakes one peer per call (a tree's inner ranks two). Not where ranks take turns on
    // the cores: there every hop waits for its rank's turn (the model's n - 1 steps).
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kRing,
     .window = {.hosts = Hosts::kOne, .cores = Cores::kOwn},
     .term = Term::kSteps,
     .override = true,
     .value = 0,
     .perRound = 0.9,
     .benchmark = kBroadcastChoiceEntry},
    // A chain's hops forward slice by slice.
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kRing,
     .window = {},
     .term = Term::kScale,
     .value = 1.05,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduce,
     .algorithm = detail::A::kRing,
     .window = {},
     .term = Term::kScale,
     .value = 1.05,
     .benchmark = kSelectorEntry},
    // Halving-doubling on a rank count that is not a power of 2 folds ranks in and out.
    {.coll = detail::C::kAllGather,
     .algorithm = detail::A::kRhd,
     .window = {.rankCount = RankCount::kNotPowerOf2},
     .term = Term::kScale,
     .value = 1.5,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduceScatter,
     .algorithm = detail::A::kRhd,
     .window = {.rankCount = RankCount::kNotPowerOf2},
     .term = Term::kScale,
     .value = 1.5,
     .benchmark = kSelectorEntry},
    // rsag's reduce-scatter: sends and receives overlap, half a step per peer.
    {.coll = detail::C::kReduceScatter,
     .algorithm = detail::A::kRsag,
     .window = {},
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.5,
     .benchmark = kSelectorEntry},
    // A direct allgather or reduce-scatter has all messages in flight at once: up to 3 ranks 0.7
    // steps per peer, from 4 a quarter step per peer and one.
    {.coll = detail::C::kAllGather,
     .algorithm = detail::A::kDirect,
     .window = {.maxRanks = 3},
     .term = Term::kSteps,
     .override = true,
     .value = 0,
     .perPeer = 0.7,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kAllGather,
     .algorithm = detail::A::kDirect,
     .window = {.minRanks = 4},
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.25,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduceScatter,
     .algorithm = detail::A::kDirect,
     .window = {.maxRanks = 3},
     .term = Term::kSteps,
     .override = true,
     .value = 0,
     .perPeer = 0.7,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduceScatter,
     .algorithm = detail::A::kDirect,
     .window = {.minRanks = 4},
     .term = Term::kSteps,
     .override = true,
     .value = 1,
     .perPeer = 0.25,
     .benchmark = kSelectorEntry},
    // On one host the allgather's copies run with no round waiting for the one before (rhd's
    // second round waits for its first); reduce-scatter adds in scratch and copies out.
    {.coll = detail::C::kAllGather,
     .algorithm = detail::A::kDirect,
     .window = detail::kOneHost,
     .term = Term::kScale,
     .value = 0.9,
     .benchmark = kRsagEntry},
    {.coll = detail::C::kAllGather,
     .algorithm = detail::A::kDirect,
     .window = detail::kSeveralHosts,
     .term = Term::kScale,
     .value = 1.1,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduceScatter,
     .algorithm = detail::A::kDirect,
     .window = {},
     .term = Term::kScale,
     .value = 1.3,
     .benchmark = kSelectorEntry},
    // A hierarchical plan's chains inside hosts run pipelined with the ring among hosts, so their
    // bandwidth term counts only in part.
    {.coll = detail::C::kAllReduce,
     .algorithm = detail::A::kHier,
     .window = {},
     .term = Term::kLocalScale,
     .value = 0.6,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kAllGather,
     .algorithm = detail::A::kHier,
     .window = {},
     .term = Term::kLocalScale,
     .value = 0.3,
     .benchmark = kSelectorEntry},
    {.coll = detail::C::kReduceScatter,
     .algorithm = detail::A::kHier,
     .window = {},
     .term = Term::kLocalScale,
     .value = 0.3,
     .benchmark = kSelectorEntry},
    // A fan broadcast pays where its root's core carries fewer receivers and the buffers outgrow
    // the caches, in place (out of place the root's own copy adds to its share); elsewhere it
    // loses to direct.
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kFan,
     .window = {},
     .term = Term::kTime,
     .value = 1.25,
     .benchmark = kFanEntry},
    {.coll = detail::C::kBroadcast,
     .algorithm = detail::A::kFan,
     .window = {.fanStreamBytes = 20.0 * (1 << 20)},
     .term = Term::kTime,
     .override = true,
     .value = 0.6,
     .benchmark = kFanEntry},
};

}  // namespace weft::select

// Synthesized plan selections cached on disk, one directory per fabric: <root>/<hash>/ holds the
// plans as MSCCL XML (their byte windows in minBytes / maxBytes) and an index naming each file
// with its method and predicted times. Files are written under a temporary name and renamed, so
// a reader sees a whole entry or none; an entry that does not read back (missing or malformed
// index or plan) is ignored and rebuilt.
#pragma once
#include <string>
#include <vector>

#include "synth/auto/synthesize.h"

namespace weft::synth {

// Hex digest of everything a selection depends on: the fabric (nodes, links, rates, routes),
// the options and the synthesizer's format version.
std::string selectionKey(const Fabric& fabric, const SelectionOptions& options);

struct CachedSelection {
  std::vector<SelectedPlan> plans;
  bool fromCache = false;          // read from disk, not synthesized
  std::string dir;                 // <root>/<key>
  double seconds = 0;              // time synthesizing (0 when read)
  std::vector<std::string> notes;  // skipped methods, a rejected cache entry, a failed write
};

// Reads <root>/<key> when it holds a valid entry (unless `rebuild`), else runs selectPlans and
// stores the result there (a failure to write is a note, never an error). An empty root
// disables the disk: the plans are synthesized every time.
CachedSelection cachedSelectPlans(const Fabric& fabric, const SelectionOptions& options,
                                  const std::string& root, bool rebuild = false);

}  // namespace weft::synth

// Runs the MSCCL XML property (msccl_xml_check.h) over plans generated here (rings and direct
// allgathers for several rank counts, a plan with nop dependencies), any seed files or
// directories given as arguments (read, never copied), and a deterministic set of malformed
// variants of all of them: truncations, byte flips, attribute values replaced by hostile numbers
// or text, steps duplicated, dropped and swapped, and hostile shapes. The malformed-input
// coverage runs in every build, with or without libFuzzer.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/msccl_xml_check.h"
#include "tests/support/text_file.h"

namespace {

using weft::test::readFile;

std::string step(int s, const char* type, const char* sb, int so, const char* db, int doff, int cnt,
                 int depid = -1, int deps = -1, int hasdep = 0) {
  std::ostringstream o;
  o << "      <step s=\"" << s << "\" type=\"" << type << "\" srcbuf=\"" << sb << "\" srcoff=\""
    << so << "\" dstbuf=\"" << db << "\" dstoff=\"" << doff << "\" cnt=\"" << cnt << "\" depid=\""
    << depid << "\" deps=\"" << deps << "\" hasdep=\"" << hasdep << "\"/>\n";
  return o.str();
}

std::string header(const std::string& name, const char* coll, int n, int chunks, bool inPlace) {
  std::ostringstream o;
  o << "<algo name=\"" << name << "\" proto=\"Simple\" nchannels=\"2\" nchunksperloop=\"" << chunks
    << "\" ngpus=\"" << n << "\" coll=\"" << coll << "\" inplace=\"" << inPlace
    << "\" outofplace=\"" << !inPlace << "\" minBytes=\"0\" maxBytes=\"0\">\n";
  return o.str();
}

// MSCCL's fused ring allreduce: s, rrs..., rrcs, rcs..., r around the ring (chunk c is finished
// by rank c-1 and passed on from there).
std::string ringAllreduce(int n, bool inPlace) {
  std::string x = header("ring" + std::to_string(n), "allreduce", n, n, inPlace);
  const char* out = inPlace ? "i" : "o";
  for (int q = 0; q < n; ++q) {
    x += "  <gpu id=\"" + std::to_string(q) + "\" i_chunks=\"" + std::to_string(n) +
         "\" o_chunks=\"" + std::to_string(inPlace ? 0 : n) + "\" s_chunks=\"0\">\n";
    x += "    <tb id=\"0\" send=\"" + std::to_string((q + 1) % n) + "\" recv=\"" +
         std::to_string((q + n - 1) % n) + "\" chan=\"1\">\n";
    auto chunk = [&](int k) { return ((k % n) + n) % n; };
    int s = 0;
    x += step(s++, "s", "i", q, "o", -1, 1);
    for (int j = 1; j <= n - 2; ++j) x += step(s++, "rrs", "i", chunk(q - j), "o", -1, 1);
    x += step(s++, "rrcs", "i", chunk(q + 1), out, chunk(q + 1), 1);
    for (int j = n; j <= 2 * n - 3; ++j) x += step(s++, "rcs", "i", -1, out, chunk(q - (j - n)), 1);
    x += step(s++, "r", "i", -1, out, chunk(q + 2), 1);
    x += "    </tb>\n  </gpu>\n";
  }
  return x + "</algo>\n";
}

// Direct allgather: one tb per peer and direction; out of place, a copy lane also puts the
// rank's own chunk into its output (it reads the input, which nothing writes).
std::string directAllgather(int n, bool inPlace) {
  std::string x = header("ag" + std::to_string(n), "allgather", n, n, inPlace);
  for (int q = 0; q < n; ++q) {
    x += "  <gpu id=\"" + std::to_string(q) + "\" i_chunks=\"" + std::to_string(inPlace ? 0 : 1) +
         "\" o_chunks=\"" + std::to_string(n) + "\" s_chunks=\"0\">\n";
    int tb = 0;
    for (int p = 0; p < n; ++p) {
      if (p == q) continue;
      x += "    <tb id=\"" + std::to_string(tb++) + "\" send=\"" + std::to_string(p) +
           "\" recv=\"-1\" chan=\"0\">\n";
      x += inPlace ? step(0, "s", "o", q, "o", -1, 1) : step(0, "s", "i", 0, "o", -1, 1);
      x += "    </tb>\n";
      x += "    <tb id=\"" + std::to_string(tb++) + "\" send=\"-1\" recv=\"" + std::to_string(p) +
           "\" chan=\"0\">\n" + step(0, "r", "i", -1, "o", p, 1) + "    </tb>\n";
    }
    if (!inPlace)
      x += "    <tb id=\"" + std::to_string(tb++) + "\" send=\"-1\" recv=\"-1\" chan=\"0\">\n" +
           step(0, "cpy", "i", 0, "o", q, 1) + "    </tb>\n";
    x += "  </gpu>\n";
  }
  return x + "</algo>\n";
}

// Two ranks, scratch and nops: each rank receives the peer's input into scratch, reduces it
// into its output after two nops that wait for the receive and for its own copy.
std::string nopPlan() {
  std::string x = header("nops", "allreduce", 2, 1, false);
  for (int q = 0; q < 2; ++q) {
    const int p = 1 - q;
    x += "  <gpu id=\"" + std::to_string(q) + "\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"1\">\n";
    x += "    <tb id=\"0\" send=\"" + std::to_string(p) + "\" recv=\"" + std::to_string(p) +
         "\" chan=\"0\">\n" + step(0, "s", "i", 0, "o", -1, 1) +
         step(1, "r", "i", -1, "s", 0, 1, -1, -1, 1) + "    </tb>\n";
    x += "    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"1\">\n" +
         step(0, "cpy", "i", 0, "o", 0, 1, -1, -1, 1) + "    </tb>\n";
    x += "    <tb id=\"2\" send=\"-1\" recv=\"-1\" chan=\"0\">\n" +
         step(0, "nop", "i", -1, "o", -1, 0, 0, 1) + step(1, "nop", "i", -1, "o", -1, 0, 1, 0) +
         step(2, "re", "s", 0, "o", 0, 1, 0, 1) + "    </tb>\n";
    x += "  </gpu>\n";
  }
  return x + "</algo>\n";
}

std::vector<std::string> listInputs(const std::string& path) {
  std::vector<std::string> out;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::printf("skipping %s (absent)\n", path.c_str());
    return out;
  }
  if (!S_ISDIR(st.st_mode)) return {path};
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".xml")
        out.push_back(path + "/" + name);
      else if (name[0] != '.' && name.find('.') == std::string::npos)
        for (const auto& f : listInputs(path + "/" + name)) out.push_back(f);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  std::string l;
  while (std::getline(s, l)) out.push_back(l + "\n");
  return out;
}

std::string joined(const std::vector<std::string>& ls) {
  std::string s;
  for (const auto& l : ls) s += l;
  return s;
}

std::vector<std::string> hostileInputs() {
  std::vector<std::string> v;
  std::string deep =
      header("deep", "allreduce", 1, 1, true) +
      "<gpu id=\"0\" i_chunks=\"1\" "
      "o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">";
  for (int i = 0; i < 20000; ++i) deep += "<step>";
  v.push_back(deep);
  for (int i = 0; i < 20000; ++i) deep += "</step>";
  v.push_back(deep + "</tb></gpu></algo>");
  std::string many = header("many", "allreduce", 1, 1, true) +
                     "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" "
                     "send=\"-1\" recv=\"-1\" chan=\"0\">";
  for (int i = 0; i < 3000; ++i) many += step(i, "nop", "i", -1, "o", -1, 0);
  v.push_back(many + "</tb></gpu></algo>");
  std::string tbs = header("tbs", "allreduce", 1, 1, true) +
                    "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\">";
  for (int i = 0; i < 2000; ++i)
    tbs += "<tb id=\"" + std::to_string(i) + "\" send=\"-1\" recv=\"-1\" chan=\"0\"/>";
  v.push_back(tbs + "</gpu></algo>");
  v.push_back(header("far", "allreduce", 1, 1, true) +
              "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"4000\" "
              "send=\"-1\" recv=\"-1\" chan=\"0\"/></gpu></algo>");
  v.push_back(header("ranks", "allreduce", 2000000000, 1, true) + "</algo>");
  v.push_back(header("chunks", "allreduce", 1, 2000000000, true) + "</algo>");
  static const char kNul[] = "<algo name=\"x\0y\"/>";  // a NUL inside an attribute
  v.push_back(std::string(kNul, sizeof(kNul) - 1));
  v.push_back("\xef\xbb\xbf<algo/>");
  v.push_back("<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaa\">]><algo name=\"&a;&a;\"/>");
  v.push_back("<algo name=\"" + std::string(100000, 'n') + "\"/>");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> inputs;  // (name, bytes)
  for (int n : {2, 3, 5, 8})
    for (bool inPlace : {false, true}) {
      const std::string mode = inPlace ? "-inplace" : "";
      inputs.push_back({"ring" + std::to_string(n) + mode, ringAllreduce(n, inPlace)});
      inputs.push_back({"allgather" + std::to_string(n) + mode, directAllgather(n, inPlace)});
    }
  inputs.push_back({"nops", nopPlan()});
  // --emit DIR: write the generated seeds as DIR/<name>.xml (the libFuzzer target's corpus).
  if (argc == 3 && std::string(argv[1]) == "--emit") {
    ::mkdir(argv[2], 0755);
    for (const auto& [name, text] : inputs) {
      std::ofstream out(std::string(argv[2]) + "/" + name + ".xml", std::ios::binary);
      out << text;
      if (!out) {
        std::fprintf(stderr, "cannot write %s/%s.xml\n", argv[2], name.c_str());
        return 1;
      }
    }
    return 0;
  }
  // Generated seeds must be valid plans that also verify: otherwise they test little.
  for (const auto& [name, text] : inputs) {
    try {
      weft::plan::ChunkPlan p = weft::plan::importMsccl(text, name);
      const uint64_t count = p.coll == weft::plan::Collective::kAllGather ? 1 : p.chunksPerLoop;
      std::string why = weft::plan::verifyMessage(weft::plan::instantiate(p, count));
      if (!why.empty()) {
        std::fprintf(stderr, "generated seed %s does not verify: %s\n%s", name.c_str(), why.c_str(),
                     text.c_str());
        return 1;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "generated seed %s is refused: %s\n%s", name.c_str(), e.what(),
                   text.c_str());
      return 1;
    }
  }
  for (int i = 1; i < argc; ++i)
    for (const auto& f : listInputs(argv[i])) inputs.push_back({f, readFile(f)});
  const size_t seeds = inputs.size();
  const char* numbers[] = {"-1", "-2", "0", "1", "7", "99999999999", "2147483648", "x", "", "1e3"};
  for (size_t s = 0; s < seeds; ++s) {
    const std::string text = inputs[s].second;  // a copy: `inputs` grows below
    const std::string name = inputs[s].first;
    if (text.empty()) continue;
    uint32_t rng = 2024 + static_cast<uint32_t>(s);
    auto next = [&] { return rng = rng * 1664525u + 1013904223u; };
    size_t stride = std::max<size_t>(1, text.size() / 30);
    for (size_t cut = 0; cut < text.size(); cut += stride)
      inputs.push_back({name + " cut " + std::to_string(cut), text.substr(0, cut)});
    const char flips[] = {'<', '>', '"', '/', '=', '\0', '\xff', ' ', '0', '-', '9'};
    for (int k = 0; k < 40; ++k) {
      std::string m = text;
      size_t pos = next() % m.size();
      m[pos] = flips[(next() >> 16) % sizeof(flips)];
      inputs.push_back({name + " flip " + std::to_string(pos), m});
    }
    // Attribute values: every quoted value is a candidate for a hostile replacement.
    std::vector<size_t> quotes;
    for (size_t at = text.find("=\""); at != std::string::npos; at = text.find("=\"", at + 1))
      quotes.push_back(at + 2);
    for (int k = 0; k < 60 && !quotes.empty(); ++k) {
      size_t begin = quotes[next() % quotes.size()];
      size_t end = text.find('"', begin);
      if (end == std::string::npos) continue;
      std::string m = text;
      m.replace(begin, end - begin, numbers[next() % (sizeof(numbers) / sizeof(numbers[0]))]);
      inputs.push_back({name + " value at " + std::to_string(begin), m});
    }
    // Steps duplicated, dropped and swapped.
    std::vector<std::string> ls = lines(text);
    std::vector<size_t> steps;
    for (size_t i = 0; i < ls.size(); ++i)
      if (ls[i].find("<step") != std::string::npos) steps.push_back(i);
    for (int k = 0; k < 10 && steps.size() > 1; ++k) {
      size_t a = steps[next() % steps.size()], b = steps[next() % steps.size()];
      std::vector<std::string> dup = ls, drop = ls, swap = ls;
      dup.insert(dup.begin() + a, ls[a]);
      drop.erase(drop.begin() + a);
      std::swap(swap[a], swap[b]);
      inputs.push_back({name + " dup step", joined(dup)});
      inputs.push_back({name + " drop step", joined(drop)});
      inputs.push_back({name + " swap steps", joined(swap)});
    }
  }
  for (const auto& h : hostileInputs()) inputs.push_back({"hostile", h});
  size_t parsed = 0;
  for (const auto& [name, bytes] : inputs) {
    try {
      parsed += weft::fuzz::checkMscclXml(bytes);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: unexpected exception: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::printf("%zu inputs (%zu seeds): %zu read as plans, %zu refused with an error\n",
              inputs.size(), seeds, parsed, inputs.size() - parsed);
  // Every seed reads; most variants must not (a flipped byte rarely leaves a valid plan).
  if (parsed < seeds || parsed * 2 > inputs.size()) {
    std::fprintf(stderr, "unexpected share of accepted inputs\n");
    return 1;
  }
  return 0;
}

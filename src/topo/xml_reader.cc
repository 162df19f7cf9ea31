// The topology XML reader's entry points and its view of the document: size and shape limits,
// typed attributes, and messages that name the element and line (see xml_reader_internal.h).
#include "src/topo/xml_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <pugixml.hpp>

#include "src/common/error.h"
#include "src/common/log.h"
#include "src/topo/xml_reader_internal.h"

namespace weft::topo {
namespace detail {

XmlReader::XmlReader(std::string_view text, const XmlReadOptions& o)
    : text_(text), opt_(o), topo_(o.rates) {}

Topology XmlReader::run() {
  if (text_.size() > opt_.maxBytes)
    fail(Status::kInvalidArgument, opt_.source + ": topology XML of " +
                                       std::to_string(text_.size()) + " bytes exceeds the " +
                                       std::to_string(opt_.maxBytes) + "-byte limit");
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') lineStarts_.push_back(i + 1);
  pugi::xml_document doc;
  pugi::xml_parse_result res =
      doc.load_buffer(text_.data(), text_.size(), pugi::parse_default, pugi::encoding_utf8);
  if (res.status == pugi::status_no_document_element)
    fail(Status::kInvalidArgument, opt_.source + ": topology XML has no <system> element");
  if (!res)
    fail(Status::kInvalidArgument, opt_.source + ":" + std::to_string(lineOf(res.offset)) +
                                       ": malformed topology XML: " + res.description());
  checkShape(doc);
  pugi::xml_node system;
  for (pugi::xml_node n : doc.children())
    if (n.type() == pugi::node_element) {
      if (std::string(n.name()) == "system") {
        system = n;
        break;
      }
      WEFT_INFO(INIT, "%s: ignoring top-level element <%s>", opt_.source.c_str(), n.name());
    }
  if (!system)
    fail(Status::kInvalidArgument, opt_.source + ": topology XML has no <system> element");
  parseSystem(system);
  resolvePciLinks();
  resolveNvLinks();
  resolveC2c();
  if (opt_.complete) complete();
  topo_.finalize();
  return std::move(topo_);
}

XmlReader::Attributes::Attributes(XmlReader* r, const pugi::xml_node& el) : r_(r), el_(el) {
  for (pugi::xml_attribute a : el.attributes()) items_.push_back({a.name(), a.value(), false});
}

std::optional<std::string> XmlReader::Attributes::str(const char* name) {
  std::optional<std::string> out;
  for (auto& it : items_) {
    if (it.name != name) continue;
    if (out) r_->error(el_, std::string("duplicate attribute ") + name);
    it.used = true;
    out = it.value;
  }
  return out;
}

std::string XmlReader::Attributes::required(const char* name) {
  auto v = str(name);
  if (!v) r_->error(el_, std::string("missing attribute ") + name);
  return *v;
}

int64_t XmlReader::Attributes::integer(const char* name, int64_t absent, int64_t lo, int64_t hi) {
  auto v = str(name);
  if (!v || v->empty()) return absent;
  const char* s = v->c_str();
  char* end = nullptr;
  errno = 0;
  bool hex = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'));
  long long x = std::strtoll(s, &end, hex ? 16 : 10);
  if (end == s || *end != '\0' || errno == ERANGE)
    r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is not an integer");
  if (x < lo || x > hi)
    r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is out of range");
  return x;
}

int XmlReader::Attributes::integer32(const char* name, int absent) {
  return static_cast<int>(integer(name, absent));
}

int XmlReader::Attributes::requiredInt(const char* name) {
  auto v = str(name);
  if (!v || v->empty()) r_->error(el_, std::string("missing attribute ") + name);
  return static_cast<int>(integer(name, 0));
}

uint64_t XmlReader::Attributes::hex(const char* name) {
  auto v = str(name);
  if (!v || v->empty()) return 0;
  const char* s = v->c_str();
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(s, &end, 16);
  if (end == s || *end != '\0' || errno == ERANGE || s[0] == '-')
    r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is not a hex number");
  return x;
}

double XmlReader::Attributes::real(const char* name, double absent) {
  auto v = str(name);
  if (!v || v->empty()) return absent;
  const char* s = v->c_str();
  char* end = nullptr;
  double x = std::strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(x))
    r_->error(el_, std::string("attribute ") + name + "=\"" + *v + "\" is not a number");
  return x;
}

void XmlReader::Attributes::rest(Attrs* out) {
  for (const auto& it : items_)
    if (!it.used) out->push_back({it.name, it.value});
}

size_t XmlReader::lineOf(ptrdiff_t offset) const {
  if (offset < 0) return 0;
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), static_cast<size_t>(offset));
  return static_cast<size_t>(it - lineStarts_.begin()) + 1;
}

std::string XmlReader::describe(const pugi::xml_node& n) const {
  std::string s = "<" + std::string(n.name());
  for (const char* key : {"busid", "numaid", "name", "dev", "target"})
    if (pugi::xml_attribute a = n.attribute(key)) {
      std::string v = a.value();
      if (v.size() > 40) v = v.substr(0, 40) + "...";
      s += " " + std::string(key) + "=\"" + v + "\"";
      break;
    }
  return s + ">";
}

[[noreturn]] void XmlReader::error(const pugi::xml_node& n, const std::string& what) const {
  fail(Status::kInvalidArgument,
       opt_.source + ":" + std::to_string(lineOf(n)) + ": " + describe(n) + ": " + what);
}

void XmlReader::checkShape(const pugi::xml_document& doc) {
  size_t elements = 0;
  int depth = 0;
  pugi::xml_node n = doc.first_child();
  while (n) {
    if (n.type() == pugi::node_element) {
      if (++elements > opt_.maxElements)
        error(n, "topology XML has more than " + std::to_string(opt_.maxElements) + " elements");
      if (depth + 1 > opt_.maxDepth)
        error(n, "topology XML nests deeper than " + std::to_string(opt_.maxDepth) + " levels");
    }
    if (n.first_child()) {
      n = n.first_child();
      ++depth;
      continue;
    }
    while (n && !n.next_sibling()) {
      n = n.parent();
      --depth;
      if (n == doc) n = pugi::xml_node();
    }
    if (n) n = n.next_sibling();
  }
}

}  // namespace detail

Topology readTopologyXml(std::string_view text, const XmlReadOptions& options) {
  return detail::XmlReader(text, options).run();
}

Topology readTopologyFile(const std::string& path, XmlReadOptions options) {
  if (options.source == "<string>") options.source = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::kSystemError, sysError("cannot open topology file " + path, errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) fail(Status::kSystemError, "cannot read topology file " + path);
  if (static_cast<uint64_t>(size) > options.maxBytes)
    fail(Status::kInvalidArgument, path + ": topology XML of " + std::to_string(size) +
                                       " bytes exceeds the " + std::to_string(options.maxBytes) +
                                       "-byte limit");
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) fail(Status::kSystemError, "cannot read topology file " + path);
  return readTopologyXml(text, options);
}

}  // namespace weft::topo

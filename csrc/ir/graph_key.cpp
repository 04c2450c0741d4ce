#include "ir/graph_key.h"

#include <cstdio>
#include <cstring>

namespace torchtpu::ir {

namespace {
inline uint64_t mix(uint64_t x) {
  x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27; x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}
}  // namespace

GraphKey Hasher::key() const {
  const uint64_t hi = mix(a_ ^ mix(b_)), lo = mix(b_ + mix(a_ ^ 0x5851F42D4C957F2DULL));
  return {hi, lo};
}

void Hasher::bytes(const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  u64(n);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    u64(w);
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    u64(w);
  }
}

void Hasher::str(const char* s) { bytes(s, std::strlen(s)); }

std::string GraphKey::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

GraphKey graph_key(const Graph& g, const GraphKey& salt) {
  Hasher h;
  h.u64(salt.hi);
  h.u64(salt.lo);
  for (const Node& n : g.nodes()) {
    h.str(n.op);
    h.u64(n.operands.size());
    for (const Value& v : n.operands) h.u64((static_cast<uint64_t>(v.node) << 16) ^ v.index);
    h.u64(n.results.size());
    for (const Type& t : n.results) {
      h.u64(static_cast<uint64_t>(t.dtype) | (t.dims.size() << 8));
      for (int64_t d : t.dims) h.u64(static_cast<uint64_t>(d));
    }
    h.u64(n.attrs.size());
    for (const Attr& a : n.attrs) {
      h.str(a.name);
      h.u64(a.kind);
      h.u64(a.ints.size());
      for (int64_t i : a.ints) h.u64(static_cast<uint64_t>(i));
      if (a.kind == Attr::kRaw) h.bytes(a.raw.data(), a.raw.size());
    }
    h.u64(static_cast<uint64_t>(n.body));
    h.u64(static_cast<uint64_t>(n.param_index));
    uint64_t c;
    std::memcpy(&c, &n.constant, 8);
    h.u64(c);
    h.u64(n.regions.size());
    for (const auto& r : n.regions) {
      const GraphKey k = graph_key(*r, GraphKey{});
      h.u64(k.hi);
      h.u64(k.lo);
    }
  }
  h.u64(0xFFFF0000u + g.outputs.size());
  for (const Value& v : g.outputs) h.u64((static_cast<uint64_t>(v.node) << 16) ^ v.index);
  h.u64(0xEEEE0000u + g.donations.size());
  if (g.replicas != 1) h.u64(0xDDDD0000u + static_cast<uint64_t>(g.replicas));
  if (g.opt_level != 0) h.u64(0xCCCC0000u + static_cast<uint64_t>(g.opt_level));
  for (auto [p, o] : g.donations) h.u64((static_cast<uint64_t>(p) << 32) ^ static_cast<uint64_t>(o));
  return h.key();
}

}  // namespace torchtpu::ir

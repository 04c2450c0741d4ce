#include "ops/bucket.h"

#include <cmath>
#include <cstring>

#include "ir/graph_key.h"
#include "ops/bucket_rewrite.h"

namespace torchtpu::ops::bucket {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2)); }
uint64_t text_hash(uint64_t h, const std::string& s) {
  for (char c : s) h = mix(h, static_cast<unsigned char>(c));
  return h;
}

}  // namespace

Sizes sizes_of(const ir::Graph& g) {
  Sizes s;
  uint64_t sk = 0x243F6A8885A308D3ULL;
  for (const ir::Node& n : g.nodes()) {
    sk = text_hash(sk, n.op);
    sk = mix(sk, static_cast<uint64_t>(n.body));
    for (const Value& v : n.operands) sk = mix(mix(sk, static_cast<uint64_t>(v.node)), static_cast<uint64_t>(v.index));
    for (const ir::Type& t : n.results) {
      sk = mix(mix(sk, static_cast<uint64_t>(t.dtype)), t.dims.size());
      s.dims.insert(s.dims.end(), t.dims.begin(), t.dims.end());
    }
    for (const ir::Attr& a : n.attrs) {
      sk = mix(text_hash(sk, a.name), a.ints.size());
      s.attrs.insert(s.attrs.end(), a.ints.begin(), a.ints.end());
      if (!a.raw.empty()) s.fixed.push_back(text_hash(0, a.raw));
    }
    if (n.op == ir::kConstant) s.constants.push_back(n.constant);
    s.fixed.push_back(static_cast<uint64_t>(n.param_index));
    for (const auto& r : n.regions) {
      const ir::GraphKey k = ir::graph_key(*r, ir::GraphKey{});
      s.fixed.push_back(k.hi ^ k.lo);
    }
  }
  for (const Value& v : g.outputs) sk = mix(mix(sk, static_cast<uint64_t>(v.node)), static_cast<uint64_t>(v.index));
  for (const auto& d : g.donations) sk = mix(mix(sk, static_cast<uint64_t>(d.first)), static_cast<uint64_t>(d.second));
  sk = mix(sk, static_cast<uint64_t>(g.replicas));
  s.skeleton = sk;
  return s;
}

std::optional<Plan> Plan::fit(const Sizes& a, const Sizes& b) {
  if (a.skeleton != b.skeleton || a.dims.size() != b.dims.size() || a.attrs.size() != b.attrs.size() ||
      a.fixed != b.fixed)
    return std::nullopt;
  Plan p;
  p.skeleton = a.skeleton;
  p.fixed = a.fixed;
  bool found = false;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    const int64_t d = std::abs(b.dims[i] - a.dims[i]);
    if (d == 0) continue;
    const int64_t best = std::abs(b.dims[p.ref] - a.dims[p.ref]);
    if (!found || d < best) p.ref = i;  // the first of the finest-varying sizes
    found = true;
  }
  if (!found) return std::nullopt;
  const int64_t dv = b.dims[p.ref] - a.dims[p.ref];
  auto affine = [&](int64_t x, int64_t y, Affine* out) {
    if ((y - x) % dv != 0) return false;
    out->a = (y - x) / dv;
    out->b = y - out->a * b.dims[p.ref];
    return true;
  };
  p.dims.resize(a.dims.size());
  p.attrs.resize(a.attrs.size());
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (!affine(a.dims[i], b.dims[i], &p.dims[i]) || p.dims[i].a < 0) return std::nullopt;
  for (size_t i = 0; i < a.attrs.size(); ++i)
    if (!affine(a.attrs[i], b.attrs[i], &p.attrs[i])) return std::nullopt;
  if (a.constants.size() != b.constants.size()) return std::nullopt;
  p.values = b.constants;
  for (size_t i = 0; i < a.constants.size(); ++i) {
    const double x = a.constants[i], y = b.constants[i];
    if (std::memcmp(&x, &y, sizeof(x)) == 0) {
      p.constants.emplace_back();
      continue;
    }
    Affine c;
    const bool integral = std::abs(x) < 1e15 && std::abs(y) < 1e15 && x == std::trunc(x) && y == std::trunc(y);
    if (!integral || !affine(static_cast<int64_t>(x), static_cast<int64_t>(y), &c) || !c.varies())
      return std::nullopt;
    p.constants.push_back(c);
  }
  return p;
}

int64_t Plan::v_of(const Sizes& s) const {
  if (s.skeleton != skeleton || s.dims.size() != dims.size() || s.attrs.size() != attrs.size() || s.fixed != fixed)
    return -1;
  const int64_t v = s.dims[ref];
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].at(v) != s.dims[i]) return -1;
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].at(v) != s.attrs[i]) return -1;
  if (s.constants.size() != constants.size()) return -1;
  for (size_t i = 0; i < constants.size(); ++i) {
    const double want = constants[i] ? static_cast<double>(constants[i]->at(v)) : values[i];
    if (std::memcmp(&want, &s.constants[i], sizeof(want)) != 0) return -1;
  }
  return v;
}

std::optional<Padded> pad(const ir::Graph& g, const Plan& plan, int64_t v, int64_t bucket_v, std::string* why) {
  return Rewriter(g, plan, v, bucket_v).run(why);
}

ir::Graph pad_input(const Port& p, ir::DType dtype, double fill) {
  ir::Graph g;
  Builder b(g);
  Value x = g.parameter(Type{dtype, p.exact});
  Dims exact, low, high;
  for (const auto& dim : p.factors)
    for (const Factor& f : dim) {
      exact.push_back(f.exact);
      low.push_back(0);
      high.push_back(f.padded - f.exact);
    }
  x = b.reshape(x, exact);
  x = b.pad(x, b.constant(dtype, fill), low, high);
  g.outputs = {b.reshape(x, p.padded)};
  return g;
}

ir::Graph unpad_output(const Port& p, ir::DType dtype) {
  ir::Graph g;
  Builder b(g);
  Value x = g.parameter(Type{dtype, p.padded});
  Dims padded, exact;
  for (const auto& dim : p.factors)
    for (const Factor& f : dim) {
      padded.push_back(f.padded);
      exact.push_back(f.exact);
    }
  x = b.reshape(x, padded);
  x = b.slice(x, Dims(padded.size(), 0), exact);
  g.outputs = {b.reshape(x, p.exact)};
  return g;
}

}  // namespace torchtpu::ops::bucket

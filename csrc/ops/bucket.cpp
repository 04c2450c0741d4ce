#include "ops/bucket.h"

#include <array>
#include <cmath>
#include <cstring>
#include <map>

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

std::optional<Plan> Plan::fit(const Sizes& a, const Sizes& b) { return fit(a, a, b); }

std::optional<Plan> Plan::fit(const Sizes& z, const Sizes& a, const Sizes& b) {
  for (const Sizes* x : {&z, &a})
    if (x->skeleton != b.skeleton || x->dims.size() != b.dims.size() || x->attrs.size() != b.attrs.size() ||
        x->fixed != b.fixed || x->constants.size() != b.constants.size())
      return std::nullopt;
  Plan p;
  p.skeleton = a.skeleton;
  p.fixed = a.fixed;
  // v is the most frequent of the finest-varying sizes (then the smallest):
  // of n, n + 1 and n - 1 (a padded and a shifted copy of a sequence), n; so
  // every graph over the same data measures v alike, and pads it alike.
  int64_t finest = 0;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    const int64_t d = std::abs(b.dims[i] - a.dims[i]);
    if (d != 0 && (finest == 0 || d < finest)) finest = d;
  }
  if (finest == 0) return std::nullopt;
  std::map<int64_t, std::pair<int64_t, size_t>> seen;  // size -> (count, first dim)
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (std::abs(b.dims[i] - a.dims[i]) == finest) {
      auto it = seen.emplace(b.dims[i], std::make_pair(int64_t{0}, i)).first;
      ++it->second.first;
    }
  int64_t most = 0;
  for (const auto& [size, cf] : seen)
    if (cf.first > most) {
      most = cf.first;
      p.ref = cf.second;
    }
  const int64_t va = a.dims[p.ref], vb = b.dims[p.ref], vz = z.dims[p.ref];
  const bool three = vz != va && vz != vb;
  if (!three && &z != &a) return std::nullopt;  // the first observation tells nothing new
  // Through (va, x) and (vb, y), and with three observations through (vz, w)
  // too: quadratic where a line misses it.
  auto fit_size = [&](int64_t w, int64_t x, int64_t y, Affine* out) {
    if (x == y && (!three || w == y)) {  // fixed (sentinels such as INT64_MAX included)
      *out = Affine{0, y, 0};
      return true;
    }
    // Past 2^31 nothing is fitted, so no product or difference below overflows
    // (a division of INT64_MIN by -1, or by a square that wrapped to 0, traps).
    constexpr int64_t kLimit = int64_t{1} << 31;
    for (int64_t t : {w, x, y, va, vb, vz})
      if (t > kLimit || t < -kLimit) return false;
    const int64_t dv = vb - va;
    // From two observations, a size that is q*v*v at both (an [n, n] matrix
    // held flat) is taken as that, not as the line through them.
    if (!three && va > 0 && vb > 0 && x != 0 && x % (va * va) == 0 && y % (vb * vb) == 0 &&
        x / (va * va) == y / (vb * vb)) {
      *out = Affine{0, 0, x / (va * va)};
      return true;
    }
    if ((y - x) % dv == 0) {
      *out = Affine{(y - x) / dv, y - (y - x) / dv * vb, 0};
      if (!three || out->at(vz) == w) return true;
    }
    if (!three) return false;
    // Divided differences: q = ([va,vb] - [vz,va]) / (vb - vz).
    const int64_t d1n = x - w, d1d = va - vz, d2n = y - x, d2d = vb - va;
    if (d1n % d1d != 0 || d2n % d2d != 0) return false;
    const int64_t s1 = d1n / d1d, s2 = d2n / d2d;
    if ((s2 - s1) % (vb - vz) != 0) return false;
    Affine f;
    f.q = (s2 - s1) / (vb - vz);
    f.a = s2 - f.q * (va + vb);
    f.b = y - (f.q * vb + f.a) * vb;
    if (f.at(vz) != w || f.at(va) != x || f.at(vb) != y) return false;
    *out = f;
    return true;
  };
  p.dims.resize(a.dims.size());
  p.attrs.resize(a.attrs.size());
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (!fit_size(z.dims[i], a.dims[i], b.dims[i], &p.dims[i]) || p.dims[i].a < 0 || p.dims[i].q < 0)
      return std::nullopt;
  for (size_t i = 0; i < a.attrs.size(); ++i)
    if (!fit_size(z.attrs[i], a.attrs[i], b.attrs[i], &p.attrs[i])) return std::nullopt;
  p.values = b.constants;
  for (size_t i = 0; i < a.constants.size(); ++i) {
    const double w = z.constants[i], x = a.constants[i], y = b.constants[i];
    if (std::memcmp(&x, &y, sizeof(x)) == 0 && std::memcmp(&w, &y, sizeof(w)) == 0) {
      p.constants.emplace_back();
      continue;
    }
    Affine c;
    auto integral = [](double t) { return std::abs(t) < 1e15 && t == std::trunc(t); };
    if (!integral(w) || !integral(x) || !integral(y) ||
        !fit_size(static_cast<int64_t>(w), static_cast<int64_t>(x), static_cast<int64_t>(y), &c) || !c.varies())
      return std::nullopt;
    p.constants.push_back(c);
  }
  return p;
}

std::optional<Plan> Plan::fit_seen(const std::vector<const Sizes*>& seen, const Sizes& now) {
  std::optional<Plan> best;
  std::array<int64_t, 4> best_score{};  // sizes followed, sizes varying, from three, -slopes
  auto consider = [&](std::optional<Plan> p, bool three) {
    if (!p || p->v_of(now) < 0) return;
    std::array<int64_t, 4> score{1, 0, three ? 1 : 0, 0};
    for (const Sizes* s : seen) score[0] += p->v_of(*s) >= 0;
    for (const std::vector<Affine>* fs : {&p->dims, &p->attrs})
      for (const Affine& f : *fs)
        if (f.varies()) {
          ++score[1];
          score[3] -= std::abs(f.a) + std::abs(f.q);
        }
    if (!best || score > best_score) {  // a tie keeps the earlier candidate: the wider span
      best = std::move(p);
      best_score = score;
    }
  };
  const size_t k = seen.size();
  if (k >= 2) consider(fit(*seen[k - 2], *seen[k - 1], now), true);
  for (size_t i = 0; i < k; ++i) consider(fit(*seen[i], now), false);
  return best;
}

Plan Plan::scaled(int64_t k) const {
  Plan p = *this;
  p.unit *= k;
  auto scale = [k](Affine& f) {
    f.a *= k;
    f.q *= k * k;
  };
  for (Affine& f : p.dims) scale(f);
  for (Affine& f : p.attrs) scale(f);
  for (auto& c : p.constants)
    if (c) scale(*c);
  return p;
}

int64_t Plan::unit_for(const ir::Graph& g, int param, int64_t fixed) const {
  size_t pos = 0;
  for (const ir::Node& n : g.nodes()) {
    if (n.op == ir::kParameter && n.param_index == param) {
      if (n.results[0].dims.size() != 1) return 1;
      const Affine& f = dims[pos];
      if (!f.varies() || f.q != 0 || f.b != 0 || fixed <= f.a || fixed % f.a != 0) return 1;
      return fixed / f.a;
    }
    for (const ir::Type& t : n.results) pos += t.dims.size();
  }
  return 1;
}

bool Plan::pads(int64_t v, int64_t bucket) const {
  if (v < 2 || bucket < v) return false;
  for (const Affine& a : dims)
    if (a.varies() && (a.at(v) < 2 || a.at(bucket) < a.at(v))) return false;
  return true;
}

int64_t Plan::v_of(const Sizes& s) const {
  if (s.skeleton != skeleton || s.dims.size() != dims.size() || s.attrs.size() != attrs.size()) return -1;
  if (s.dims[ref] % unit != 0) return -1;
  const int64_t v = s.dims[ref] / unit;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].at(v) != s.dims[i]) return -1;
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].at(v) != s.attrs[i]) return -1;
  if (s.constants.size() != constants.size()) return -1;
  for (size_t i = 0; i < constants.size(); ++i) {
    const double want = constants[i] ? static_cast<double>(constants[i]->at(v)) : values[i];
    if (std::memcmp(&want, &s.constants[i], sizeof(want)) != 0) return -1;
  }
  return s.fixed == fixed ? v : -1;  // last: the longest to compare, and the sizes tell most graphs apart
}

std::optional<Padded> pad(const ir::Graph& g, const Plan& plan, int64_t v, int64_t bucket_v, std::string* why) {
  return Rewriter(g, plan, v, bucket_v).run(why);
}

ir::Graph pad_inputs(const std::vector<Port>& ports, const std::vector<ir::DType>& dtypes,
                     const std::vector<double>& fills) {
  ir::Graph g;
  Builder b(g);
  for (size_t i = 0; i < ports.size(); ++i) {
    const Port& p = ports[i];
    Value x = g.parameter(Type{dtypes[i], p.exact});
    Dims exact, low, high;
    for (const auto& dim : p.factors)
      for (const Factor& f : dim) {
        exact.push_back(f.exact);
        low.push_back(0);
        high.push_back(f.padded - f.exact);
      }
    x = b.reshape(x, exact);
    x = b.pad(x, b.constant(dtypes[i], fills[i]), low, high);
    g.outputs.push_back(b.reshape(x, p.padded));
  }
  return g;
}

ir::Graph unpad_outputs(const std::vector<Port>& ports, const std::vector<ir::DType>& dtypes) {
  ir::Graph g;
  Builder b(g);
  for (size_t i = 0; i < ports.size(); ++i) {
    const Port& p = ports[i];
    Value x = g.parameter(Type{dtypes[i], p.padded});
    Dims padded, exact;
    for (const auto& dim : p.factors)
      for (const Factor& f : dim) {
        padded.push_back(f.padded);
        exact.push_back(f.exact);
      }
    x = b.reshape(x, padded);
    x = b.slice(x, Dims(padded.size(), 0), exact);
    g.outputs.push_back(b.reshape(x, p.exact));
  }
  return g;
}

}  // namespace torchtpu::ops::bucket

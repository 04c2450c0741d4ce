#include "ops/bucket_rewrite.h"

#include <cstring>

namespace torchtpu::ops::bucket {

bool padded(const std::vector<Factor>& dim) {
  for (const Factor& f : dim)
    if (f.size.varies()) return true;
  return false;
}
bool padded(const Layout& l) {
  for (const auto& d : l)
    if (padded(d)) return true;
  return false;
}
int64_t padded_size(const std::vector<Factor>& dim) {
  int64_t n = 1;
  for (const Factor& f : dim) n *= f.padded;
  return n;
}
std::vector<Factor> canonical(const std::vector<Factor>& dim) {
  std::vector<Factor> out;
  for (const Factor& f : dim) {
    if (!f.size.varies() && f.exact == 1) continue;
    if (!f.size.varies() && !out.empty() && !out.back().size.varies()) {
      Factor& m = out.back();
      m.exact *= f.exact;
      m.padded = m.exact;
      m.size = Affine{0, m.exact};
    } else {
      out.push_back(f);
    }
  }
  return out;
}
bool same(const std::vector<Factor>& a0, const std::vector<Factor>& b0) {
  const std::vector<Factor> a = canonical(a0), b = canonical(b0);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].exact != b[i].exact || a[i].padded != b[i].padded || a[i].size.a != b[i].size.a ||
        a[i].size.b != b[i].size.b || a[i].size.q != b[i].size.q)
      return false;
  return true;
}
std::vector<Factor> plain(Affine size, int64_t v, int64_t bv) {
  if (!size.varies()) return {Factor{size.b, size.b, size}};
  if (size.q > 0 && size.a == 0 && size.b == 0) {  // q*v*v: the factors [q, v, v]
    const Factor n{v, bv, Affine{1, 0}};
    return {Factor{size.q, size.q, Affine{0, size.q}}, n, n};
  }
  if (size.q == 0 && size.a > 1 && size.b % size.a == 0) {  // a*(v + c): the factors [a, v + c]
    const Affine inner{1, size.b / size.a};
    return {Factor{size.a, size.a, Affine{0, size.a}}, Factor{inner.at(v), inner.at(bv), inner}};
  }
  return {Factor{size.at(v), size.at(bv), size}};
}
std::vector<Factor> prefix(Affine size, int64_t v, int64_t bv) {
  if (!size.varies()) return {Factor{size.b, size.b, size}};
  return {Factor{size.at(v), size.at(bv), size}};
}

Value Rewriter::true_size(Affine s) {
  if (!vparam_.valid()) {
    vparam_ = out_.graph.parameter(Type{DType::kS64, {}});
    out_.v_index = out_.graph.num_parameters() - 1;
  }
  Value t = b_.mul(vparam_, b_.constant(DType::kS64, static_cast<double>(s.a)));
  if (s.q) t = b_.add(t, b_.mul(b_.mul(vparam_, vparam_), b_.constant(DType::kS64, static_cast<double>(s.q))));
  return s.b ? b_.add(t, b_.constant(DType::kS64, static_cast<double>(s.b))) : t;
}

Value Rewriter::mask(const Layout& l, const std::vector<int64_t>& which) {
  const Dims d = padded_dims(l);
  Value m;
  for (int64_t w : which) {
    const auto& dim = l[w];
    int64_t inner = padded_size(dim);
    for (size_t f = 0; f < dim.size(); ++f) {
      inner = dim[f].padded ? inner / dim[f].padded : 0;  // an empty factor: no elements to mask
      if (!dim[f].size.varies()) continue;
      Value digit = b_.iota(DType::kS64, d, w);
      if (inner > 1) digit = b_.div(digit, b_.constant(DType::kS64, static_cast<double>(inner), d));
      if (f > 0) digit = b_.rem(digit, b_.constant(DType::kS64, static_cast<double>(dim[f].padded), d));
      Value real = b_.compare(digit, b_.broadcast_in_dim(true_size(dim[f].size), d, {}), Cmp::kLT);
      m = m.valid() ? b_.logical_and(m, real) : real;
    }
  }
  return m;
}

Value Rewriter::masked(Value x, const Layout& l, const std::vector<int64_t>& which, Value fill) {
  std::vector<int64_t> varying;
  for (int64_t w : which)
    if (padded(l[w])) varying.push_back(w);
  if (varying.empty()) return x;
  return b_.select(mask(l, varying), x, b_.broadcast_in_dim(fill, b_.dims(x), {}));
}

// A flat storage parameter takes the factors of its finest reshape (the
// tensor it holds, rather than a view merging its dims); one a slice reads
// at a start moving by whole rows of a*(v + c) elements (the last token's
// row of [n, a]) holds v + c rows of a; one used otherwise is a single
// padded dim.
Layout Rewriter::param_layout(int32_t node, size_t pos) {
  const ir::Node& p = g_.nodes()[node];
  Layout l = plain_layout(pos, p.results[0].dims.size());
  if (p.results[0].dims.size() != 1 || !padded(l)) return l;
  const Affine size = dim_aff(pos);
  size_t at = 0, apos = 0;
  std::vector<Factor> best;
  bool rows = false;
  for (int32_t i = 0; i < static_cast<int32_t>(g_.nodes().size()); ++i) {
    const ir::Node& n = g_.nodes()[i];
    if (i > node && std::strcmp(n.op, "stablehlo.reshape") == 0 && n.operands[0].node == node) {
      std::vector<Factor> fs;
      for (size_t d = 0; d < n.results[0].dims.size(); ++d) {
        for (const Factor& f : plain(dim_aff(at + d), v_, bv_))
          if (f.exact != 1 || f.size.varies()) fs.push_back(f);
      }
      if (padded_size(fs) == padded_size(l[0]) && fs.size() > best.size()) best = fs;
    }
    if (i > node && std::strcmp(n.op, "stablehlo.slice") == 0 && n.operands[0].node == node && !n.attrs.empty() &&
        n.attrs[0].ints.size() == 1) {
      const Affine start = plan_.attrs[apos];  // start_indices, one int
      rows |= size.q == 0 && size.a > 1 && size.b % size.a == 0 && start.q == 0 && start.a == size.a &&
              start.b % size.a == 0;
    }
    for (const ir::Type& t : n.results) at += t.dims.size();
    for (const ir::Attr& a : n.attrs) apos += a.ints.size();
  }
  if (!best.empty()) return {best};
  if (rows) {
    const Affine inner{1, size.b / size.a};
    return {{Factor{inner.at(v_), inner.at(bv_), inner}, Factor{size.a, size.a, Affine{0, size.a}}}};
  }
  return l;
}

Layout Rewriter::reshape(const ir::Node& n, const Layout& from, size_t pos) {
  std::vector<Factor> seq;
  for (const auto& dim : from)
    for (const Factor& f : dim)
      if (f.exact != 1 || f.size.varies()) seq.push_back(f);
  Layout to;
  size_t k = 0;
  const Dims& exact = n.results[0].dims;
  for (size_t d = 0; d < exact.size(); ++d) {
    const Affine want = dim_aff(pos + d);
    std::vector<Factor> dim;
    int64_t need = exact[d];
    while (need > 1) {
      if (k >= seq.size()) refuse(n, "no factors left");
      Factor f = seq[k];
      if (f.exact == 0) refuse(n, "an empty factor");  // nothing to divide by
      if (f.size.varies()) {
        if (need % f.exact != 0) refuse(n, "splits a padded dim");
        need /= f.exact;
        dim.push_back(f);
        ++k;
      } else if (need >= f.exact) {
        if (need % f.exact != 0) refuse(n, "regroups a padded dim's factors");
        need /= f.exact;
        dim.push_back(f);
        ++k;
      } else {
        if (f.exact % need != 0) refuse(n, "splits a factor unevenly");
        dim.push_back(Factor{need, need, Affine{0, need}});
        seq[k] = Factor{f.exact / need, f.exact / need, Affine{0, f.exact / need}};
        need = 1;
      }
    }
    if (dim.empty()) dim.push_back(Factor{1, 1, Affine{0, 1}});
    const int64_t want_padded = want.varies() ? want.at(bv_) : want.b;
    if (padded(dim) && padded_size(dim) != want_padded && dim.size() == 1) refuse(n, "padded size mismatch");
    to.push_back(std::move(dim));
  }
  for (; k < seq.size(); ++k)  // a varying factor of size 1 here still holds padding
    if (seq[k].exact != 1 || seq[k].size.varies()) refuse(n, "factors left over");
  return to;
}

std::optional<Padded> Rewriter::run(std::string* why) {
  try {
    info_.resize(g_.nodes().size());
    if (v_ < 2 || bv_ < v_) throw std::runtime_error("size " + std::to_string(v_) + " is not bucketed");
    for (const Affine& a : plan_.dims)
      if (a.varies() && (a.at(v_) < 2 || a.at(bv_) < a.at(v_)))
        throw std::runtime_error("a varying size below 2");
    size_t pos = 0, apos = 0;
    const_index_.assign(g_.nodes().size(), 0);
    for (size_t i = 0, c = 0; i < g_.nodes().size(); ++i)
      if (g_.nodes()[i].op == ir::kConstant) const_index_[i] = c++;
    for (int32_t i = 0; i < static_cast<int32_t>(g_.nodes().size()); ++i) node(i, pos, apos);
    for (int i = 0; i < g_.num_parameters(); ++i) {
      const Value p = g_.parameter_value(i);
      const Info& x = in(p);
      if (!padded(x.layout)) continue;
      Port port{i, g_.type(p).dims, b_.dims(x.nv), x.layout};
      out_.exact_elements += g_.type(p).numel();
      out_.padded_elements += b_.type(x.nv).numel();
      out_.inputs.push_back(std::move(port));
    }
    for (size_t o = 0; o < g_.outputs.size(); ++o) {
      const Info& x = in(g_.outputs[o]);
      out_.graph.outputs.push_back(x.nv);
      if (!padded(x.layout)) continue;
      out_.outputs.push_back(Port{static_cast<int>(o), g_.type(g_.outputs[o]).dims, b_.dims(x.nv), x.layout});
      out_.exact_elements += g_.type(g_.outputs[o]).numel();
      out_.padded_elements += b_.type(x.nv).numel();
    }
    for (const auto& [p, o] : g_.donations) {
      bool crosses = false;
      for (const Port& q : out_.inputs) crosses |= q.index == p;
      for (const Port& q : out_.outputs) crosses |= q.index == o;
      if (!crosses) out_.graph.donations.push_back({out_.v_index >= 0 && p >= out_.v_index ? p + 1 : p, o});
    }
    out_.graph.replicas = g_.replicas;
    return std::move(out_);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

}  // namespace torchtpu::ops::bucket

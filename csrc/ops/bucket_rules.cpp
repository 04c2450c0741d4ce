// Each op kind's rule for a padded dim (bucket.h): how its result is laid
// out, and the masks that keep padded elements from real ones.
#include <algorithm>
#include <cstring>
#include <set>

#include "ops/bucket_rewrite.h"

namespace torchtpu::ops::bucket {

namespace {

// The integers of "name = [1, 2]" in a raw attribute text (empty if absent).
std::vector<int64_t> raw_list(const std::string& text, const std::string& name) {
  std::vector<int64_t> out;
  size_t at = text.find(name + " = ");
  if (at == std::string::npos) return out;
  at += name.size() + 3;
  if (text[at] != '[') {
    out.push_back(std::stoll(text.substr(at)));
    return out;
  }
  size_t end = text.find(']', at);
  std::string body = text.substr(at + 1, end - at - 1);
  size_t p = 0;
  while (p < body.size()) {
    size_t q = body.find(',', p);
    if (q == std::string::npos) q = body.size();
    if (body.find_first_not_of(' ', p) < q) out.push_back(std::stoll(body.substr(p, q - p)));
    p = q + 1;
  }
  return out;
}
const ir::Attr* attr(const ir::Node& n, const char* name) {
  for (const ir::Attr& a : n.attrs)
    if (std::strcmp(a.name, name) == 0) return &a;
  return nullptr;
}

const std::set<std::string>& elementwise() {
  static const std::set<std::string> ops = {
      "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide", "stablehlo.maximum",
      "stablehlo.minimum", "stablehlo.power", "stablehlo.atan2", "stablehlo.remainder", "stablehlo.and",
      "stablehlo.or", "stablehlo.xor", "stablehlo.not", "stablehlo.negate", "stablehlo.abs",
      "stablehlo.exponential", "stablehlo.exponential_minus_one", "stablehlo.log", "stablehlo.log_plus_one",
      "stablehlo.sqrt", "stablehlo.rsqrt", "stablehlo.cbrt", "stablehlo.tanh", "stablehlo.logistic",
      "stablehlo.sine", "stablehlo.cosine", "stablehlo.tan", "stablehlo.floor", "stablehlo.ceil",
      "stablehlo.round_nearest_even", "stablehlo.round_nearest_afz", "stablehlo.sign", "stablehlo.is_finite",
      "stablehlo.compare", "stablehlo.select", "stablehlo.convert", "stablehlo.clamp", "stablehlo.shift_left",
      "stablehlo.shift_right_logical", "stablehlo.shift_right_arithmetic", "stablehlo.popcnt",
      "stablehlo.count_leading_zeros", "stablehlo.real", "stablehlo.imag", "stablehlo.complex",
      "stablehlo.bitcast_convert",  // of one width; one that adds or drops a dim is refused by rank
      "chlo.acos", "chlo.acosh", "chlo.asin", "chlo.asinh", "chlo.atan", "chlo.atanh", "chlo.cosh", "chlo.sinh",
      "chlo.erf", "chlo.erfc", "chlo.lgamma", "chlo.next_after"};
  return ops;
}

// "4x(n:16->32)": a dim's factors, a varying one as its exact and padded size.
std::string text_of(const std::vector<Factor>& dim) {
  std::string s;
  for (const Factor& f : dim) {
    if (!s.empty()) s += "x";
    s += f.size.varies() ? "(" + std::to_string(f.exact) + "->" + std::to_string(f.padded) + ")"
                         : std::to_string(f.exact);
  }
  return s.empty() ? "1" : s;
}
std::string differently(const std::vector<Factor>& a, const std::vector<Factor>& b) {
  return "operands padded differently (" + text_of(a) + " and " + text_of(b) + ")";
}

}  // namespace

void Rewriter::node(int32_t i, size_t& pos, size_t& apos) {
  const ir::Node& n = g_.nodes()[i];
  const size_t first = pos;
  std::vector<size_t> at;  // per result: its dims' first position
  for (const ir::Type& t : n.results) {
    at.push_back(pos);
    pos += t.dims.size();
  }
  bool attrs_vary = false;
  std::vector<std::vector<Affine>> attr_aff;
  for (const ir::Attr& a : n.attrs) {
    attr_aff.emplace_back();
    for (size_t k = 0; k < a.ints.size(); ++k) {
      attr_aff.back().push_back(plan_.attrs[apos++]);
      attrs_vary |= attr_aff.back().back().varies();
      if (attr_aff.back().back().q != 0) refuse(n, "an attribute varies with the square of the size");
    }
  }
  std::vector<Info>& mine = info_[i];
  mine.resize(n.results.size());
  if (n.op == ir::kConstant) ++cpos_;
  const bool const_varies = n.op == ir::kConstant && plan_.constants[cpos_ - 1].has_value();
  if (n.op == ir::kParameter) {
    Layout l = param_layout(i, first);
    mine[0] = {out_.graph.parameter(Type{n.results[0].dtype, padded_dims(l)}), l};
    return;
  }
  bool any = false;
  for (Value x : n.operands) any |= padded(in(x).layout);
  for (size_t r = 0; r < n.results.size(); ++r)
    for (size_t d = 0; d < n.results[r].dims.size(); ++d) any |= dim_aff(at[r] + d).varies();
  std::vector<Value> ops;
  for (Value x : n.operands) ops.push_back(in(x).nv);
  const std::string op = n.op;
  if (!any && !attrs_vary && !const_varies) {  // untouched by padding: copied as it is
    ir::Node copy = n;
    copy.operands = ops;
    Value v0 = out_.graph.append(std::move(copy));
    for (size_t r = 0; r < n.results.size(); ++r)
      mine[r] = {Value{v0.node, static_cast<int32_t>(r)}, plain_layout(at[r], n.results[r].dims.size())};
    return;
  }
  auto result_type = [&](const Layout& l, size_t r = 0) { return Type{n.results[r].dtype, padded_dims(l)}; };
  auto emit = [&](std::vector<Value> operands, const Layout& l, std::vector<ir::Attr> attrs) {
    ir::Node copy = n;
    copy.operands = std::move(operands);
    copy.attrs = std::move(attrs);
    copy.results = {result_type(l)};
    mine[0] = {out_.graph.append(std::move(copy)), l};
  };
  if (attrs_vary && op != "stablehlo.slice") refuse(n, "an attribute varies with the size");
  if (op == ir::kConstant && plan_.constants[cpos_ - 1]) {  // a count: computed from v
    Layout l = plain_layout(at[0], n.results[0].dims.size());
    Value c = b_.convert(true_size(*plan_.constants[cpos_ - 1]), n.results[0].dtype);
    mine[0] = {b_.broadcast_in_dim(c, padded_dims(l), {}), l, std::vector<bool>(l.size(), true)};
  } else if (op == ir::kConstant || op == "stablehlo.iota") {
    Layout l = plain_layout(at[0], n.results[0].dims.size());
    if (op == "stablehlo.iota") {
      const int64_t d = attr(n, "iota_dimension")->ints[0];
      l[d] = prefix(dim_aff(at[0] + d), v_, bv_);
    }
    emit({}, l, n.attrs);
    mine[0].uniform.assign(l.size(), true);  // an iota varies along its own dim only
    if (op == "stablehlo.iota") mine[0].uniform[attr(n, "iota_dimension")->ints[0]] = false;
  } else if (elementwise().count(op)) {
    const size_t rank = n.results[0].dims.size();
    Layout l(rank);
    std::vector<bool> uniform(rank, true);
    for (size_t d = 0; d < rank; ++d) {
      const std::vector<Factor>* chosen = nullptr;
      bool chosen_uniform = true;
      for (Value x : n.operands) {
        const Info& xi = in(x);
        if (xi.layout.empty() && rank > 0) continue;  // a scalar bound of clamp
        if (xi.layout.size() != rank) refuse(n, "operand ranks differ");
        const bool u = d < xi.uniform.size() && xi.uniform[d];
        if (!chosen || (chosen_uniform && !u)) {
          if (chosen && padded_size(*chosen) != padded_size(xi.layout[d]))
            refuse(n, differently(*chosen, xi.layout[d]));
          chosen = &xi.layout[d];
          chosen_uniform = u;
        } else if (!u && !same(xi.layout[d], *chosen)) {
          refuse(n, differently(*chosen, xi.layout[d]));
        } else if (padded_size(xi.layout[d]) != padded_size(*chosen)) {
          refuse(n, differently(*chosen, xi.layout[d]));
        }
        uniform[d] = uniform[d] && u;
      }
      if (!chosen) refuse(n, "no operand");
      l[d] = *chosen;
    }
    emit(ops, l, n.attrs);
    mine[0].uniform = uniform;
  } else if (op == "stablehlo.broadcast_in_dim") {
    const Layout& src = in(n.operands[0]).layout;
    Layout l = plain_layout(at[0], n.results[0].dims.size());
    const std::vector<int64_t>& bd = attr(n, "broadcast_dimensions")->ints;
    std::vector<bool> uniform(l.size(), true);
    const Info& si = in(n.operands[0]);
    for (size_t k = 0; k < bd.size(); ++k) {
      const int64_t exact = g_.type(n.operands[0]).dims[k];
      if (exact == n.results[0].dims[bd[k]]) {
        uniform[bd[k]] = k < si.uniform.size() && si.uniform[k];
        if (padded(src[k]) || padded(l[bd[k]])) l[bd[k]] = src[k];
      } else if (padded(src[k])) {
        refuse(n, "broadcasts a padded dim");
      }
    }
    emit(ops, l, n.attrs);
    mine[0].uniform = uniform;
  } else if (op == "stablehlo.reshape") {
    emit(ops, reshape(n, in(n.operands[0]).layout, at[0]), n.attrs);
  } else if (op == "stablehlo.transpose") {
    const Layout& src = in(n.operands[0]).layout;
    Layout l;
    std::vector<bool> uniform;
    const Info& si = in(n.operands[0]);
    for (int64_t p : attr(n, "permutation")->ints) {
      l.push_back(src[p]);
      uniform.push_back(static_cast<size_t>(p) < si.uniform.size() && si.uniform[p]);
    }
    emit(ops, l, n.attrs);
    mine[0].uniform = uniform;
  } else if (op == "stablehlo.reduce") {
    const size_t k = n.operands.size() / 2;
    const std::vector<int64_t>& rd = attr(n, "dimensions")->ints;
    const Layout& src = in(n.operands[0]).layout;
    for (size_t j = 0; j < k; ++j) {
      for (size_t d = 0; d < src.size(); ++d)
        if (!same(in(n.operands[j]).layout[d], src[d])) refuse(n, "inputs padded differently");
      ops[j] = masked(ops[j], src, rd, ops[k + j]);
    }
    Layout l;
    for (int64_t d = 0; d < static_cast<int64_t>(src.size()); ++d)
      if (std::find(rd.begin(), rd.end(), d) == rd.end()) l.push_back(src[d]);
    ir::Node copy = n;
    copy.operands = ops;
    for (size_t r = 0; r < n.results.size(); ++r) copy.results[r] = result_type(l, r);
    Value v0 = out_.graph.append(std::move(copy));
    for (size_t r = 0; r < n.results.size(); ++r) mine[r] = {Value{v0.node, static_cast<int32_t>(r)}, l};
  } else if (op == "stablehlo.dot_general") {
    const std::string& dn = attr(n, "dot_dimension_numbers")->raw;
    const auto lb = raw_list(dn, "lhs_batching_dimensions"), rb = raw_list(dn, "rhs_batching_dimensions");
    const auto lc = raw_list(dn, "lhs_contracting_dimensions"), rc = raw_list(dn, "rhs_contracting_dimensions");
    const Layout& ll = in(n.operands[0]).layout;
    const Layout& rl = in(n.operands[1]).layout;
    for (size_t j = 0; j < lb.size(); ++j)
      if (!same(ll[lb[j]], rl[rb[j]])) refuse(n, "batch dims padded differently");
    for (size_t j = 0; j < lc.size(); ++j)
      if (!same(ll[lc[j]], rl[rc[j]])) refuse(n, "contracting dims padded differently");
    ops[0] = masked(ops[0], ll, lc, b_.constant(b_.dtype(ops[0]), 0));
    ops[1] = masked(ops[1], rl, rc, b_.constant(b_.dtype(ops[1]), 0));
    Layout l;
    for (int64_t d : lb) l.push_back(ll[d]);
    auto free_dims = [&](const Layout& x, const std::vector<int64_t>& bt, const std::vector<int64_t>& ct) {
      for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d)
        if (std::find(bt.begin(), bt.end(), d) == bt.end() && std::find(ct.begin(), ct.end(), d) == ct.end())
          l.push_back(x[d]);
    };
    free_dims(ll, lb, lc);
    free_dims(rl, rb, rc);
    emit(ops, l, n.attrs);
  } else if (op == "stablehlo.slice") {
    const Layout& src = in(n.operands[0]).layout;
    const size_t r = src.size();
    // attrs: start_indices, limit_indices, strides (each r ints)
    Dims start(r), limit(r), stride = attr(n, "strides")->ints;
    Layout l = plain_layout(at[0], r);
    // A start that varies: a fixed block at a runtime start (x[:, n - 1]).
    // Only the outermost factor of the dim may vary, so a row's padded
    // offset is its exact offset.
    auto rows_only = [&](size_t d) {
      int64_t inner = 1;
      for (size_t f = 1; f < src[d].size(); ++f) {
        if (src[d][f].size.varies()) return false;
        inner *= src[d][f].exact;
      }
      const Affine s = attr_aff[0][d];
      return inner != 0 && s.a % inner == 0 && s.b % inner == 0;
    };
    bool moving = false;
    for (size_t d = 0; d < r; ++d) moving |= attr_aff[0][d].varies() && stride[d] == 1 && !padded(l[d]);
    if (moving) {
      std::vector<Value> starts;
      Dims sizes;
      for (size_t d = 0; d < r; ++d) {
        const Affine s = attr_aff[0][d], e = attr_aff[1][d];
        if (stride[d] != 1 || (padded(src[d]) && !rows_only(d)) || padded(l[d]))
          refuse(n, "a block at a runtime start of a padded dim");
        starts.push_back(s.varies() ? true_size(s) : b_.constant(DType::kS64, static_cast<double>(s.b)));
        sizes.push_back(e.at(v_) - s.at(v_));
      }
      mine[0] = {b_.dynamic_slice(ops[0], starts, sizes), l, {}};
      return;
    }
    for (size_t d = 0; d < r; ++d) {
      const Affine s = attr_aff[0][d], e = attr_aff[1][d];
      if (!padded(src[d]) && !s.varies() && !e.varies()) {
        start[d] = s.b;
        limit[d] = e.b;
        continue;
      }
      if (stride[d] != 1) refuse(n, "strides over a padded dim");
      if (src[d].size() > 1 && !src[d][0].size.varies()) {
        // Whole rows of a merged dim's outermost (fixed) factor, as a
        // chunk of a flat value takes.
        int64_t inner_exact = 1, inner_padded = 1;
        for (size_t f = 1; f < src[d].size(); ++f) {
          inner_exact *= src[d][f].exact;
          inner_padded *= src[d][f].padded;
        }
        const int64_t s0 = s.at(v_), e0 = e.at(v_);
        if (inner_exact == 0 || s0 % inner_exact != 0 || e0 % inner_exact != 0 ||
            s.at(bv_) != s0 / inner_exact * inner_padded ||
            e.at(bv_) != e0 / inner_exact * inner_padded)
          refuse(n, "slices a merged padded dim other than by whole rows");
        const int64_t rows = e0 / inner_exact - s0 / inner_exact;
        start[d] = s0 / inner_exact * inner_padded;
        limit[d] = e0 / inner_exact * inner_padded;
        l[d].clear();
        if (rows != 1) l[d].push_back(Factor{rows, rows, Affine{0, rows}});
        l[d].insert(l[d].end(), src[d].begin() + 1, src[d].end());
        continue;
      }
      if (src[d].size() != 1 || s.varies() || l[d][0].size.varies() != e.varies())
        refuse(n, "slices a padded dim other than from a fixed start");
      start[d] = s.b;
      limit[d] = e.varies() ? e.at(bv_) : e.b;
      l[d] = prefix(dim_aff(at[0] + d), v_, bv_);
      if (limit[d] > padded_size(src[d])) refuse(n, "slices beyond the padded dim");
    }
    emit(ops, l,
         {ir::Attr::array("start_indices", start), ir::Attr::array("limit_indices", limit),
          ir::Attr::array("strides", stride)});
  } else if (op == "stablehlo.dynamic_update_slice") {
    // A write of whole rows of a merged dim's outermost (fixed) factor, or
    // of a fixed block, at starts known when the graph was built.
    // A padded block writes its real elements only: its padding takes the
    // destination's values.
    const Layout& dst = in(n.operands[0]).layout;
    const Layout& upd = in(n.operands[1]).layout;
    std::vector<Value> operands{ops[0], ops[1]};
    std::vector<int64_t> masked_dims;
    Dims starts;
    for (size_t d = 0; d < dst.size(); ++d) {
      const ir::Node& sn = g_.node(n.operands[2 + d]);
      if (sn.op != ir::kConstant) refuse(n, "a start known only at run time");
      const int64_t s0 = static_cast<int64_t>(sn.constant);
      int64_t start = s0;
      const bool start_varies = plan_.constants[const_index_[n.operands[2 + d].node]].has_value();
      if (padded(dst[d]) && dst[d].size() > 1 && !dst[d][0].size.varies()) {
        std::vector<Factor> inner(dst[d].begin() + 1, dst[d].end());
        int64_t inner_exact = 1;
        for (const Factor& f : inner) inner_exact *= f.exact;
        std::vector<Factor> rows = canonical(upd[d]);
        if (!rows.empty() && !rows[0].size.varies() && !same(rows, inner)) rows.erase(rows.begin());
        if (inner_exact == 0 || s0 % inner_exact != 0 || !same(rows, inner))
          refuse(n, "writes other than whole rows");
        start = s0 / inner_exact * padded_size(inner);
      } else if (padded(dst[d]) || padded(upd[d])) {
        if (start_varies || dst[d].size() != 1 || upd[d].size() != 1) refuse(n, "writes a padded block");
        if (padded(upd[d])) masked_dims.push_back(static_cast<int64_t>(d));
        if (start + padded_size(upd[d]) > padded_size(dst[d])) refuse(n, "writes past the padded dim");
      } else if (start_varies) {
        refuse(n, "a varying start in a fixed dim");
      }
      starts.push_back(start);
      operands.push_back(out_.graph.constant(DType::kS64, static_cast<double>(start)));
    }
    if (!masked_dims.empty()) {
      Dims end = starts;
      const Dims up = b_.dims(ops[1]);
      for (size_t d = 0; d < end.size(); ++d) end[d] += up[d];
      operands[1] = b_.select(mask(upd, masked_dims), ops[1], b_.slice(ops[0], starts, end));
    }
    emit(operands, dst, n.attrs);
  } else if (op == "stablehlo.pad") {
    const Layout& src = in(n.operands[0]).layout;
    const auto& lo = attr(n, "edge_padding_low")->ints;
    const auto& hi = attr(n, "edge_padding_high")->ints;
    const auto& it = attr(n, "interior_padding")->ints;
    Layout l = plain_layout(at[0], src.size());
    std::vector<int64_t> fill;
    for (size_t d = 0; d < src.size(); ++d) {
      if (!padded(src[d])) continue;
      if (src[d].size() != 1 || it[d] != 0 || lo[d] < 0 || hi[d] < 0) refuse(n, "pads a padded dim");
      if (hi[d] > 0) fill.push_back(static_cast<int64_t>(d));
    }
    emit(ops, l, n.attrs);
    if (!fill.empty()) {  // the high padding goes right after the real elements
      Layout shifted = l;
      for (int64_t d : fill) shifted[d][0].size.b -= hi[d];
      mine[0].nv = b_.select(mask(shifted, fill), mine[0].nv, b_.broadcast_in_dim(ops[1], padded_dims(l), {}));
    }
  } else if (op == "stablehlo.concatenate") {
    const int64_t c = attr(n, "dimension")->ints[0];
    const Layout& first = in(n.operands[0]).layout;
    bool along = false;
    for (Value x : n.operands) {
      const Layout& xl = in(x).layout;
      if (padded(xl[c])) {
        if (xl[c].size() != 1) refuse(n, "concatenates along a merged padded dim");
        along = true;
      }
      for (size_t d = 0; d < xl.size(); ++d)
        if (static_cast<int64_t>(d) != c && !same(xl[d], first[d])) refuse(n, "operands padded differently");
    }
    Layout l = first;
    l[c] = along ? prefix(dim_aff(at[0] + c), v_, bv_) : plain(dim_aff(at[0] + c), v_, bv_);
    emit(ops, l, n.attrs);
    if (along) {
      // Each operand after the first goes right after the real elements
      // before it (a runtime offset); later ones overwrite its padding.
      Value r = mine[0].nv;
      Value offset = b_.constant(DType::kS64, 0);
      const Value zero = b_.constant(DType::kS64, 0);
      for (size_t k = 0; k + 1 < n.operands.size(); ++k) {
        const std::vector<Factor>& f = in(n.operands[k]).layout[c];
        offset = b_.add(offset, f[0].size.varies() ? true_size(f[0].size)
                                                   : b_.constant(DType::kS64, static_cast<double>(f[0].exact)));
        std::vector<Value> starts(l.size(), zero);
        starts[c] = offset;
        r = b_.dynamic_update_slice_at(r, ops[k + 1], starts);
      }
      mine[0].nv = r;
    }
  } else if (op == "stablehlo.gather") {
    if (padded(in(n.operands[0]).layout)) refuse(n, "gathers from a padded operand");
    const std::string& dn = attr(n, "dimension_numbers")->raw;
    const auto offset = raw_list(dn, "offset_dims");
    const int64_t ivd = raw_list(dn, "index_vector_dim").at(0);
    const Layout& il = in(n.operands[1]).layout;
    if (ivd < static_cast<int64_t>(il.size()) && padded(il[ivd])) refuse(n, "padded index vectors");
    Layout l = plain_layout(at[0], n.results[0].dims.size());
    size_t k = 0;
    for (size_t d = 0; d < l.size(); ++d) {
      if (std::find(offset.begin(), offset.end(), static_cast<int64_t>(d)) != offset.end()) continue;
      if (static_cast<int64_t>(k) == ivd) ++k;
      l[d] = il.at(k++);
    }
    emit(ops, l, n.attrs);
  } else if (op == "stablehlo.scatter") {
    // A padded update adds zero; or, for other combiners, its index points
    // past the operand, and XLA drops an update out of bounds (as JAX's
    // mode="drop" relies on).
    // Into a padded operand: real indices name real positions, and each
    // update window spans its operand dim, laid out alike.
    const Layout& ol = in(n.operands[0]).layout;
    const std::string& dn = attr(n, "scatter_dimension_numbers")->raw;
    const auto window = raw_list(dn, "update_window_dims");
    const auto inserted = raw_list(dn, "inserted_window_dims");
    std::vector<int64_t> operand_windows;
    for (int64_t d = 0; d < static_cast<int64_t>(ol.size()); ++d)
      if (std::find(inserted.begin(), inserted.end(), d) == inserted.end()) operand_windows.push_back(d);
    if (operand_windows.size() != window.size()) refuse(n, "window dims");
    const int64_t ivd = raw_list(dn, "index_vector_dim").at(0);
    const Layout& il = in(n.operands[1]).layout;
    const Layout& ul = in(n.operands[2]).layout;
    if (ivd < static_cast<int64_t>(il.size()) && padded(il[ivd])) refuse(n, "padded index vectors");
    // An index names a position in the exact layout of its operand dim; the
    // padded layout keeps those positions only where no factor but the
    // outermost is padded (a flat n*n storage laid out [n, n] moves
    // i*(n + 1), a diagonal, to another place).
    for (int64_t d : raw_list(dn, "scatter_dims_to_operand_dims")) {
      const std::vector<Factor> f = canonical(ol.at(d));
      for (size_t i = 1; i < f.size(); ++i)
        if (f[i].size.varies()) refuse(n, "indices into a dim whose inner factors are padded");
    }
    std::vector<int64_t> scatter_dims;
    size_t k = 0;
    for (int64_t d = 0; d < static_cast<int64_t>(ul.size()); ++d) {
      auto w = std::find(window.begin(), window.end(), d);
      if (w != window.end()) {
        const std::vector<Factor>& od = ol[operand_windows[w - window.begin()]];
        if ((padded(ul[d]) || padded(od)) && !same(ul[d], od)) refuse(n, "an update window padded otherwise");
        continue;
      }
      if (static_cast<int64_t>(k) == ivd) ++k;
      if (!same(ul[d], il.at(k++))) refuse(n, "indices and updates padded differently");
      scatter_dims.push_back(d);
    }
    if (n.body == Body::kAdd) {
      ops[2] = masked(ops[2], ul, scatter_dims, b_.constant(b_.dtype(ops[2]), 0));
    } else {
      if (!is_signed_int(b_.dtype(ops[1]))) refuse(n, "unsigned indices");
      for (int64_t d : g_.type(n.operands[0]).dims)
        if (d >= (1 << 30)) refuse(n, "an operand dim too large to index past");
      std::vector<int64_t> index_dims;
      for (int64_t d = 0; d < static_cast<int64_t>(il.size()); ++d)
        if (d != ivd) index_dims.push_back(d);
      ops[1] = masked(ops[1], il, index_dims, b_.constant(b_.dtype(ops[1]), 1 << 30));
    }
    emit(ops, ol, n.attrs);
  } else {
    refuse(n, "no rule for a padded dim");
  }
  // Every rule's result holds the graph's sizes at v and the plan's at the
  // bucket: a plan fitted to sizes that only looked affine (v*(v + 1) from
  // two observations) is refused here rather than misread.
  for (size_t r = 0; r < n.results.size(); ++r) {
    const Layout& l = mine[r].layout;
    const Dims& exact = n.results[r].dims;
    if (l.size() != exact.size()) refuse(n, "rank changed");
    for (size_t d = 0; d < exact.size(); ++d) {
      int64_t real = 1;
      for (const Factor& f : l[d]) real *= f.exact;
      const Affine want = dim_aff(at[r] + d);
      if (real != exact[d] || padded_size(l[d]) != (want.varies() ? want.at(bv_) : exact[d]))
        refuse(n, "dim " + std::to_string(d) + " laid out as " + text_of(l[d]) + " where the plan pads it to " +
                      std::to_string(want.varies() ? want.at(bv_) : exact[d]));
    }
    if (b_.dims(mine[r].nv) != padded_dims(l)) refuse(n, "the padded value's shape differs from its layout");
  }
}

}  // namespace torchtpu::ops::bucket

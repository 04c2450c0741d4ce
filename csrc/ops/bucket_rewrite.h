// The rewrite of a graph into its bucket's program (bucket.h): the layout
// of padded dims, and the Rewriter that walks the graph. Internal to
// ops/bucket*.cpp: bucket_rewrite.cpp holds the walk and the masks,
// bucket_rules.cpp each op kind's rule.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/bucket.h"

namespace torchtpu::ops::bucket {

using Layout = std::vector<std::vector<Factor>>;  // per dim

bool padded(const std::vector<Factor>& dim);
bool padded(const Layout& l);
int64_t padded_size(const std::vector<Factor>& dim);
// Adjacent fixed factors merged, size-1 ones dropped: two dims laid out
// alike have equal canonical forms.
std::vector<Factor> canonical(const std::vector<Factor>& dim);
bool same(const std::vector<Factor>& a, const std::vector<Factor>& b);
// A fixed dim, or a varying one: k*(v + c) as the factors [k, v + c] and
// k*v*v as [k, v, v] (so it splits and merges with the dims it came from),
// else a single factor.
std::vector<Factor> plain(Affine size, int64_t v, int64_t bv);
// An iota's own dim counts its padded elements too: a single factor.
std::vector<Factor> prefix(Affine size, int64_t v, int64_t bv);

// Rewrites one graph into its bucket's program; fails with a reason.
class Rewriter {
 public:
  Rewriter(const ir::Graph& g, const Plan& plan, int64_t v, int64_t bv)
      : g_(g), plan_(plan), v_(v), bv_(bv), b_(out_.graph) {}
  std::optional<Padded> run(std::string* why);

 private:
  struct Info {
    Value nv;
    Layout layout;
    // Per dim: the value is the same all along it (a splat, a broadcast), so
    // it takes the layout of what it meets.
    std::vector<bool> uniform;
  };
  [[noreturn]] void refuse(const ir::Node& n, const std::string& what) {
    std::string shapes;
    for (Value x : n.operands)
      shapes += (shapes.empty() ? "" : ", ") + std::string(g_.node(x).op) + " " + text(g_.type(x).dims);
    throw std::runtime_error(std::string(n.op) + " (" + shapes + ") -> " + text(n.results.at(0).dims) + ": " + what);
  }
  static std::string text(const Dims& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  }
  Affine dim_aff(size_t pos) const { return plan_.dims[pos]; }
  const Info& in(Value x) const { return info_[x.node][x.index]; }
  Layout plain_layout(size_t pos, size_t rank) const {
    Layout l;
    for (size_t d = 0; d < rank; ++d) l.push_back(plain(dim_aff(pos + d), v_, bv_));
    return l;
  }
  static Dims padded_dims(const Layout& l) {
    Dims d;
    for (const auto& dim : l) d.push_back(padded_size(dim));
    return d;
  }
  Value true_size(Affine s);
  // bool [dims of x's padded shape]: true at the real elements of `which` dims.
  Value mask(const Layout& l, const std::vector<int64_t>& which);
  Value masked(Value x, const Layout& l, const std::vector<int64_t>& which, Value fill);
  Layout param_layout(int32_t node, size_t pos);
  // Node i by its op kind's rule (bucket_rules.cpp); `pos` and `apos` walk
  // the plan's dims and attribute ints.
  void node(int32_t i, size_t& pos, size_t& apos);
  Layout reshape(const ir::Node& n, const Layout& from, size_t pos);

  const ir::Graph& g_;
  const Plan& plan_;
  int64_t v_, bv_;
  Padded out_;
  Builder b_;
  Value vparam_;
  std::vector<std::vector<Info>> info_;
  size_t cpos_ = 0;  // constants seen
  std::vector<size_t> const_index_;  // per node: its index among the constants
};

}  // namespace torchtpu::ops::bucket

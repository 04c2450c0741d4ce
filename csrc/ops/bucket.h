// Bucketing (DESIGN decision 17): one program serves every value of a
// varying size within a bucket. Two graphs of the same structure that differ
// only in sizes give a Plan: which sizes (result dims and attribute ints)
// vary, each an affine function a*v + b of one size v. pad() rewrites a
// graph that follows the plan into the program of v's bucket: every varying
// dim at its padded size, the true v as a runtime argument (the last
// parameter), and masks wherever padded elements could reach a real one:
// reductions and contractions over a padded dim, padding along one. Each op
// kind declares its rule here; a graph with a padded dim reaching an op
// without one is refused (the caller compiles it at its exact sizes), so
// bucketing changes how often programs compile, never a result.
//
// Layout: a padded dim is a list of factors, outermost first (a dim made by
// merging dims, as a reshape of [4, n, 64] to [4n, 64] does); each varying
// factor holds its real elements at indices below its true size. Parameters
// and outputs cross the program boundary through small programs (pad_inputs,
// unpad_outputs) that convert between the exact flat storage value and the
// padded one. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/builder.h"

namespace torchtpu::ops::bucket {

// Everything about a graph that its sizes decide, in node order, with a hash
// of the rest (op kinds, edges, dtypes, ranks, outputs, donations).
struct Sizes {
  uint64_t skeleton = 0;
  std::vector<int64_t> dims;    // every result dim
  std::vector<int64_t> attrs;   // every integer attribute element
  std::vector<uint64_t> fixed;  // hashes of what must not vary: raw attributes, regions
  std::vector<double> constants;  // every constant's value
};
Sizes sizes_of(const ir::Graph& g);

// a*v + b, or q*v*v + a*v + b: the element count of a flat storage holding
// an [n, n] matrix (attention weights saved for the backward) grows as v^2.
struct Affine {
  int64_t a = 0, b = 0, q = 0;
  int64_t at(int64_t v) const { return (q * v + a) * v + b; }
  bool varies() const { return a != 0 || q != 0; }
};

struct Plan {
  std::vector<Affine> dims, attrs;
  std::vector<uint64_t> fixed;
  // Per constant: nullopt when it is fixed (at its value in `values`), else
  // an integer affine in v (an element count, as a mean divides by).
  std::vector<std::optional<Affine>> constants;
  std::vector<double> values;
  uint64_t skeleton = 0;
  size_t ref = 0;    // the dim that is v (times unit)
  int64_t unit = 1;  // v = dims[ref] / unit
  // From two observations of one skeleton; nullopt when nothing varies or
  // the differences are not affine in one size.
  static std::optional<Plan> fit(const Sizes& first, const Sizes& second);
  // From three: each size affine or quadratic in v (integer coefficients).
  static std::optional<Plan> fit(const Sizes& first, const Sizes& second, const Sizes& third);
  // The plan through `now` and the sizes seen before it (oldest first), of
  // those through `now` and one earlier size or the last two: the one that
  // the most of those sizes follow; then the one where the most sizes vary;
  // then the one from three sizes (it tells v*v from v); then the one with
  // the smallest slopes; then the one through the earliest size (the widest
  // span). Where two sizes vary independently (a prompt's length and a
  // token's position in a decode loop over prompts), the plan over prompts
  // at one position, which every later prompt follows, wins once two
  // earlier prompts reached that position; and of a prompt at two
  // positions, the one it shares with the prompt before, not a neighbour
  // where another size happens to stay fixed.
  static std::optional<Plan> fit_seen(const std::vector<const Sizes*>& seen, const Sizes& now);
  // v for a graph with these sizes when it follows the plan exactly, else -1.
  int64_t v_of(const Sizes& s) const;
  // Whether a graph at size v pads to `bucket`: v and every varying size
  // at least 2 (a size 1 broadcasts), none shrinking in the bucket.
  bool pads(int64_t v, int64_t bucket) const;
  // The same plan in a k times smaller unit: a graph that sees only 4n
  // (a [4, n] batch flattened) measures n, as the programs around it do.
  Plan scaled(int64_t k) const;
  // The unit in which the flat parameter `param` of `g` (at size v) holds
  // `fixed` elements per unit of v, as a padded value an earlier program
  // left says: k when the parameter's size is a*v with fixed == k*a, else 1.
  int64_t unit_for(const ir::Graph& g, int param, int64_t fixed) const;
};

// One dim of a value crossing the program boundary, as factors (outermost
// first): each factor's exact size and padded size (equal when fixed).
struct Factor {
  int64_t exact = 1, padded = 1;
  Affine size;  // the true size as a function of v
};
struct Port {
  int index = 0;  // parameter or output index in the graph
  Dims exact, padded;
  std::vector<std::vector<Factor>> factors;  // per dim
};

struct Padded {
  // The exact graph's parameters (padded), with v (an s64 scalar) inserted
  // at v_index where a mask needs it (-1: none does).
  ir::Graph graph;
  int v_index = -1;
  std::vector<Port> inputs, outputs;  // the padded ones
  int64_t exact_elements = 0, padded_elements = 0;  // of the padded inputs and outputs
};

// The bucket's program of `g` (which follows `plan` at size v, padded to
// `bucket_v` >= v); nullopt with the reason in `why` when an op has no rule.
std::optional<Padded> pad(const ir::Graph& g, const Plan& plan, int64_t v, int64_t bucket_v, std::string* why);

// Programs converting ports, one parameter and output each, in order: exact
// flat values -> padded flat values (padding filled with `fills`), and back.
ir::Graph pad_inputs(const std::vector<Port>& ports, const std::vector<ir::DType>& dtypes,
                     const std::vector<double>& fills);
ir::Graph unpad_outputs(const std::vector<Port>& ports, const std::vector<ir::DType>& dtypes);

}  // namespace torchtpu::ops::bucket

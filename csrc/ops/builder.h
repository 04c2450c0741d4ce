// Builder: typed helpers that append StableHLO nodes to an ir::Graph. Every
// lowering in ops/ is written with these; shapes are checked here so a bad
// lowering fails while building, not inside XLA.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torchtpu::ops {

using ir::Body;
using ir::Dims;
using ir::DType;
using ir::Type;
using ir::Value;

enum class Cmp { kEQ, kNE, kLT, kLE, kGT, kGE };

// How exactly float32 dot_general and convolution compute (StableHLO's
// precision_config): kDefault lets the backend pick (one bfloat16 pass on
// TPU), kHigh about 3 passes, kHighest full float32.
enum class Precision : uint8_t { kDefault, kHigh, kHighest };

class Builder {
 public:
  explicit Builder(ir::Graph& g) : g_(g) {}
  ir::Graph& graph() { return g_; }

  // The precision of the float32 dot_generals and convolutions built from
  // here on (a node attribute, so part of the graph key); kDefault adds none.
  void set_precision(Precision p) { precision_ = p; }
  // Appends the precision_config attribute to `attrs` when operands of
  // dtype `t` take one.
  void add_precision(DType t, std::vector<ir::Attr>& attrs) const;

  // By value: a reference into the graph dangles once a node is added.
  Type type(Value v) const { return g_.type(v); }
  Dims dims(Value v) const { return g_.type(v).dims; }
  DType dtype(Value v) const { return g_.type(v).dtype; }
  int64_t rank(Value v) const { return g_.type(v).rank(); }

  Value constant(DType t, double v, Dims dims = {});
  Value zeros_like(Value v) { return constant(dtype(v), 0, dims(v)); }
  Value full_like(Value v, double x) { return constant(dtype(v), x, dims(v)); }

  Value unary(const char* op, Value a);
  // Same-shape, same-dtype elementwise op (callers broadcast and convert).
  Value binary(const char* op, Value a, Value b);
  // Numpy broadcasting of both sides, then the op.
  Value binary_bcast(const char* op, Value a, Value b);
  Value add(Value a, Value b) { return binary_bcast("stablehlo.add", a, b); }
  Value sub(Value a, Value b) { return binary_bcast("stablehlo.subtract", a, b); }
  Value mul(Value a, Value b) { return binary_bcast("stablehlo.multiply", a, b); }
  Value div(Value a, Value b) { return binary_bcast("stablehlo.divide", a, b); }
  Value max(Value a, Value b) { return binary_bcast("stablehlo.maximum", a, b); }
  Value min(Value a, Value b) { return binary_bcast("stablehlo.minimum", a, b); }
  Value neg(Value a) { return unary("stablehlo.negate", a); }
  // Bitwise on integers, logical on bool.
  Value logical_or(Value a, Value b) { return binary_bcast("stablehlo.or", a, b); }
  Value logical_and(Value a, Value b) { return binary_bcast("stablehlo.and", a, b); }
  Value logical_not(Value a) { return unary("stablehlo.not", a); }
  Value exp(Value a) { return unary("stablehlo.exponential", a); }
  Value log(Value a) { return unary("stablehlo.log", a); }
  Value sqrt(Value a) { return unary("stablehlo.sqrt", a); }
  Value rsqrt(Value a) { return unary("stablehlo.rsqrt", a); }
  Value tanh(Value a) { return unary("stablehlo.tanh", a); }
  Value abs(Value a);  // of a complex value: its magnitude (a real value)
  Value floor(Value a) { return unary("stablehlo.floor", a); }
  Value ceil(Value a) { return unary("stablehlo.ceil", a); }
  Value round_even(Value a) { return unary("stablehlo.round_nearest_even", a); }
  Value sin(Value a) { return unary("stablehlo.sine", a); }
  Value cos(Value a) { return unary("stablehlo.cosine", a); }
  Value tan(Value a) { return unary("stablehlo.tan", a); }
  Value log1p(Value a) { return unary("stablehlo.log_plus_one", a); }
  Value expm1(Value a) { return unary("stablehlo.exponential_minus_one", a); }
  Value is_finite(Value a);  // bool
  Value pow(Value a, Value b) { return binary_bcast("stablehlo.power", a, b); }
  Value atan2(Value a, Value b) { return binary_bcast("stablehlo.atan2", a, b); }
  // C's fmod: the sign of the dividend.
  Value rem(Value a, Value b) { return binary_bcast("stablehlo.remainder", a, b); }
  Value logical_xor(Value a, Value b) { return binary_bcast("stablehlo.xor", a, b); }
  Value shift_left(Value a, Value b) { return binary_bcast("stablehlo.shift_left", a, b); }
  Value shift_right_logical(Value a, Value b) { return binary_bcast("stablehlo.shift_right_logical", a, b); }
  // Scalar-times-value helpers with structural constants.
  Value add_c(Value a, double c) { return add(a, constant(dtype(a), c)); }
  Value mul_c(Value a, double c) { return mul(a, constant(dtype(a), c)); }

  Value compare(Value a, Value b, Cmp cmp);  // broadcasts; result bool
  Value select(Value pred, Value on_true, Value on_false);  // broadcasts all three
  // Elementwise conversion with PyTorch's semantics (to bool: != 0; float
  // to integer: see float_to_int).
  Value convert(Value a, DType t);
  // Complex values: built from parts, their parts (real types), conjugate.
  Value complex(Value re, Value im);
  Value real(Value a);  // a itself when a is real
  Value imag(Value a);  // zeros when a is real
  Value conj(Value a);  // a itself when a is real
  Value float_to_int(Value a, DType t);
  Value bitcast_convert(Value a, DType t);

  Value reshape(Value a, Dims dims);
  Value transpose(Value a, std::vector<int64_t> perm);
  Value broadcast_in_dim(Value a, Dims dims, std::vector<int64_t> bdims);
  // Numpy-style broadcast of `a` to `dims` (trailing alignment).
  Value broadcast_to(Value a, const Dims& dims);
  Value slice(Value a, Dims start, Dims limit, Dims strides = {});
  Value slice_dim(Value a, int64_t dim, int64_t start, int64_t limit, int64_t step = 1);
  Value concatenate(const std::vector<Value>& vs, int64_t dim);
  Value reverse(Value a, std::vector<int64_t> dims);
  Value pad(Value a, Value pad_value, Dims low, Dims high, Dims interior = {});
  Value iota(DType t, Dims dims, int64_t dim);
  Value dynamic_update_slice(Value a, Value update, const std::vector<int64_t>& start);
  // `update` written at runtime starts (s64 scalars, one per dim).
  Value dynamic_update_slice_at(Value a, Value update, const std::vector<Value>& starts);
  // The block of `sizes` at runtime starts (s64 scalars, one per dim; XLA
  // clamps them so the block stays inside `a`).
  Value dynamic_slice(Value a, const std::vector<Value>& starts, Dims sizes);

  // Reduction over `dims` with a structural init value.
  Value reduce(Value a, std::vector<int64_t> dims, Body body, double init);
  Value reduce_sum(Value a, std::vector<int64_t> dims) { return reduce(a, std::move(dims), Body::kAdd, 0); }
  Value reduce_max(Value a, std::vector<int64_t> dims);
  Value reduce_min(Value a, std::vector<int64_t> dims);
  // Reinserts reduced dims as size 1 (keepdim).
  Value keepdim(Value reduced, const Dims& full, const std::vector<int64_t>& dims);

  // dot_general with batch and contracting dimension lists.
  Value dot_general(Value a, Value b, std::vector<int64_t> lhs_batch, std::vector<int64_t> rhs_batch,
                    std::vector<int64_t> lhs_contract, std::vector<int64_t> rhs_contract,
                    DType result);

  // Gathers slices of `a` at `indices` (shape [..., k], last dim the index
  // vector over `index_dims` of a); those dims are collapsed, the others are
  // taken whole and placed at `offset_dims` of the result.
  Value gather(Value a, Value indices, const std::vector<int64_t>& index_dims,
               const std::vector<int64_t>& offset_dims, Dims result_dims);
  // Scatter counterpart: `updates` hold whole windows of the non-indexed dims
  // at `window_dims`; body kReplace or kAdd.
  Value scatter(Value a, Value indices, Value updates, const std::vector<int64_t>& index_dims,
                const std::vector<int64_t>& window_dims, Body body);

  // Solves op(a) x = rhs (left) or x op(a) = rhs for triangular `a`
  // ([..., n, n], batch dims equal to rhs's); op transposes when asked.
  Value triangular_solve(Value a, Value rhs, bool left, bool lower, bool unit_diagonal, bool transpose);
  // Cholesky factor of [..., n, n]; only the `lower` (else upper) triangle is
  // meaningful in the result.
  Value cholesky(Value a, bool lower);

  // Lowest / highest finite or infinite values used as identities.
  static double lowest(DType t);
  static double highest(DType t);

  // stablehlo.sort of same-shape `operands` along `dim`, ordered by the first
  // (ir::Body::kSortAsc / kSortDesc: PyTorch's NaN order); all are permuted
  // alike, e.g. keys with an iota of indices. `stable` keeps ties in order.
  std::vector<Value> sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable);

  // stablehlo.while over the carried values `init`: `cond` maps them to a 0-d
  // bool, `body` to their next values (same types). Each is built in a graph
  // of its own that sees only the carried values and structural constants, so
  // loop invariants are passed in `init` too. Returns the final values.
  using LoopCond = std::function<Value(Builder&, const std::vector<Value>&)>;
  using LoopBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::vector<Value> while_loop(const std::vector<Value>& init, const LoopCond& cond, const LoopBody& body);

 private:
  ir::Graph& g_;
  Precision precision_ = Precision::kDefault;
};

std::string cmp_attr(Cmp c, DType t);
// Numpy's broadcast of two shapes (trailing alignment).
Dims broadcast_shapes(const Dims& a, const Dims& b);
std::string shape_str(const Dims& d);

// Thrown by lowerings for unsupported or invalid cases; the aten layer turns
// it into a Python error naming the op.
struct LoweringError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace torchtpu::ops

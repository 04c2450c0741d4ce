#include "ops/builder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace torchtpu::ops {

using ir::Attr;

std::string shape_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string cmp_attr(Cmp c, DType t) {
  (void)t;
  switch (c) {
    case Cmp::kEQ: return "#stablehlo<comparison_direction EQ>";
    case Cmp::kNE: return "#stablehlo<comparison_direction NE>";
    case Cmp::kLT: return "#stablehlo<comparison_direction LT>";
    case Cmp::kLE: return "#stablehlo<comparison_direction LE>";
    case Cmp::kGT: return "#stablehlo<comparison_direction GT>";
    case Cmp::kGE: return "#stablehlo<comparison_direction GE>";
  }
  return "";
}

double Builder::lowest(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kU8: case DType::kU32: case DType::kU64: return 0;
    case DType::kS8: return -128;
    case DType::kS16: return -32768;
    case DType::kS32: return -2147483648.0;
    case DType::kS64: return -9223372036854775808.0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

// 64-bit maxima are not doubles: 2^63 / 2^64 stand for them, and the printer
// saturates them to the type's largest value.
double Builder::highest(DType t) {
  switch (t) {
    case DType::kBool: return 1;
    case DType::kU8: return 255;
    case DType::kU32: return 4294967295.0;
    case DType::kU64: return 18446744073709551616.0;
    case DType::kS8: return 127;
    case DType::kS16: return 32767;
    case DType::kS32: return 2147483647.0;
    case DType::kS64: return 9223372036854775808.0;
    default: return std::numeric_limits<double>::infinity();
  }
}

Value Builder::constant(DType t, double v, Dims dims) {
  if (ir::is_complex(t)) {  // (v, 0): complex literals are built from real ones
    const DType r = ir::real_of(t);
    return complex(constant(r, v, dims), constant(r, 0, dims));
  }
  // 8-bit float literals are float32 ones converted (XLA's rounding; no
  // printer for their bits).
  if (ir::is_float8(t)) return convert(constant(DType::kF32, v, std::move(dims)), t);
  if (dims.empty()) return g_.constant(t, v);
  // A 0-d constant broadcast keeps the literal small.
  Value c = g_.constant(t, v);
  return g_.add("stablehlo.broadcast_in_dim", {c}, Type{t, std::move(dims)},
                {Attr::array("broadcast_dimensions", {})});
}

// Arithmetic on 8-bit floats runs in float32 and rounds once, as PyTorch's
// CPU kernels compute them (and float8_e4m3fn saturates, see convert).
Value Builder::unary(const char* op, Value a) {
  if (ir::is_float8(dtype(a))) return convert(unary(op, convert(a, DType::kF32)), dtype(a));
  return g_.add(op, {a}, type(a));
}

Value Builder::binary(const char* op, Value a, Value b) {
  if (type(a) != type(b))
    throw LoweringError(std::string(op) + ": operand types differ " + shape_str(dims(a)) + " vs " +
                        shape_str(dims(b)));
  if (ir::is_float8(dtype(a)))
    return convert(binary(op, convert(a, DType::kF32), convert(b, DType::kF32)), dtype(a));
  return g_.add(op, {a, b}, type(a));
}

Dims broadcast_shapes(const Dims& a, const Dims& b) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)  // PyTorch's words, with the shapes
      throw LoweringError("The size of tensor a (" + std::to_string(da) + ") must match the size of tensor b (" +
                          std::to_string(db) + ") at non-singleton dimension " + std::to_string(i) + " (shapes " +
                          shape_str(a) + " and " + shape_str(b) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value Builder::binary_bcast(const char* op, Value a, Value b) {
  if (dtype(a) != dtype(b)) throw LoweringError(std::string(op) + ": operand dtypes differ");
  if (dims(a) != dims(b)) {
    Dims out = broadcast_shapes(dims(a), dims(b));
    a = broadcast_to(a, out);
    b = broadcast_to(b, out);
  }
  if (ir::is_float8(dtype(a)))
    return convert(binary(op, convert(a, DType::kF32), convert(b, DType::kF32)), dtype(a));
  return g_.add(op, {a, b}, type(a));
}

Value Builder::is_finite(Value a) {
  if (ir::is_complex(dtype(a))) return logical_and(is_finite(real(a)), is_finite(imag(a)));
  return g_.add("stablehlo.is_finite", {a}, ir::Type{DType::kBool, dims(a)}); }

Value Builder::compare(Value a, Value b, Cmp cmp) {
  if (dims(a) != dims(b)) {
    Dims out = broadcast_shapes(dims(a), dims(b));
    a = broadcast_to(a, out);
    b = broadcast_to(b, out);
  }
  // The comparison type is explicit: XLA's simplifier has been seen to
  // compare size-1 signed values as unsigned without it.
  const DType t = dtype(a);
  if (ir::is_complex(t)) {  // equality of both parts; complex numbers have no order
    if (cmp != Cmp::kEQ && cmp != Cmp::kNE) throw LoweringError("complex numbers cannot be ordered");
    Value eq = logical_and(compare(real(a), real(b), Cmp::kEQ), compare(imag(a), imag(b), Cmp::kEQ));
    return cmp == Cmp::kEQ ? eq : logical_not(eq);
  }
  const char* type = is_float(t) ? "#stablehlo<comparison_type FLOAT>"
                     : is_signed_int(t) ? "#stablehlo<comparison_type SIGNED>"
                                        : "#stablehlo<comparison_type UNSIGNED>";
  return g_.add("stablehlo.compare", {a, b}, Type{DType::kBool, dims(a)},
                {Attr::text("comparison_direction", cmp_attr(cmp, t)), Attr::text("compare_type", type)});
}

Value Builder::select(Value pred, Value t, Value f) {
  Dims out = broadcast_shapes(broadcast_shapes(dims(pred), dims(t)), dims(f));
  pred = broadcast_to(pred, out);
  t = broadcast_to(t, out);
  f = broadcast_to(f, out);
  if (dtype(t) != dtype(f)) throw LoweringError("select: branch dtypes differ");
  return g_.add("stablehlo.select", {pred, t, f}, type(t));
}

Value Builder::convert(Value a, DType t) {
  if (dtype(a) == t) return a;
  // PyTorch's casts: a real value becomes (x, 0); a complex one keeps its
  // real part (and bool is "!= 0" of both parts).
  if (ir::is_complex(t)) {
    if (ir::is_complex(dtype(a))) return complex(convert(real(a), ir::real_of(t)), convert(imag(a), ir::real_of(t)));
    const Value re = convert(a, ir::real_of(t));
    return complex(re, zeros_like(re));
  }
  if (ir::is_complex(dtype(a))) {
    if (t == DType::kBool) return logical_or(convert(real(a), t), convert(imag(a), t));
    return convert(real(a), t);
  }
  // 8-bit floats reach integers and bool through float32; into
  // float8_e4m3fn (no infinities) values saturate at +-448, as PyTorch's
  // cast does (XLA's gives NaN).
  if (ir::is_float8(dtype(a)) && !is_float(t)) return convert(convert(a, DType::kF32), t);
  if (t == DType::kF8E4M3FN && is_float(dtype(a))) {
    // (through float32, as PyTorch's cast from any float type)
    if (dtype(a) != DType::kF32) a = convert(a, DType::kF32);
    const Value lim = constant(DType::kF32, 448, dims(a));
    a = max(min(a, lim), neg(lim));
  }
  if (t == DType::kBool) {
    // Conversion to bool is "!= 0", as in PyTorch.
    return compare(a, constant(dtype(a), 0, dims(a)), Cmp::kNE);
  }
  if (is_float(dtype(a)) && (is_signed_int(t) || t == DType::kU8)) return float_to_int(a, t);
  // bool to float as a select: XLA rewrites a product with a converted bool
  // into a select, which drops the NaN of inf * 0 and the sign of -x * 0.
  if (dtype(a) == DType::kBool && is_float(t)) return select(a, constant(t, 1, dims(a)), constant(t, 0, dims(a)));
  return g_.add("stablehlo.convert", {a}, Type{t, dims(a)});
}

Value Builder::complex(Value re, Value im) {
  const DType r = dtype(re);
  const DType c = r == DType::kF64 ? DType::kC128 : DType::kC64;
  if (r != ir::real_of(c)) re = convert(re, ir::real_of(c));
  if (dtype(im) != ir::real_of(c)) im = convert(im, ir::real_of(c));
  if (dims(re) != dims(im)) {
    Dims out = broadcast_shapes(dims(re), dims(im));
    re = broadcast_to(re, out);
    im = broadcast_to(im, out);
  }
  return g_.add("stablehlo.complex", {re, im}, Type{c, dims(re)});
}

Value Builder::abs(Value a) {
  if (ir::is_float8(dtype(a))) return convert(abs(convert(a, DType::kF32)), dtype(a));
  if (!ir::is_complex(dtype(a))) return unary("stablehlo.abs", a);
  return g_.add("stablehlo.abs", {a}, Type{ir::real_of(dtype(a)), dims(a)});
}

Value Builder::real(Value a) {
  if (!ir::is_complex(dtype(a))) return a;
  return g_.add("stablehlo.real", {a}, Type{ir::real_of(dtype(a)), dims(a)});
}

Value Builder::imag(Value a) {
  if (!ir::is_complex(dtype(a))) return zeros_like(a);
  return g_.add("stablehlo.imag", {a}, Type{ir::real_of(dtype(a)), dims(a)});
}

Value Builder::conj(Value a) {
  if (!ir::is_complex(dtype(a))) return a;
  return complex(real(a), neg(imag(a)));
}

// PyTorch's CPU conversion (x86's): truncation toward zero; NaN and values
// outside int32 (int64 for int64) become that type's minimum, and int8,
// int16 and uint8 keep the low bits of the int32. XLA would saturate.
Value Builder::float_to_int(Value a, DType t) {
  const DType wide = t == DType::kS64 ? DType::kS64 : DType::kS32;
  const double lim = wide == DType::kS64 ? 9223372036854775808.0 : 2147483648.0;
  Value x = (dtype(a) == DType::kF16 || dtype(a) == DType::kBF16) ? convert(a, DType::kF32) : a;
  Value in_range = logical_and(compare(x, constant(dtype(x), -lim, dims(x)), Cmp::kGE),
                               compare(x, constant(dtype(x), lim, dims(x)), Cmp::kLT));
  Value w = g_.add("stablehlo.convert", {x}, Type{wide, dims(x)});
  Value r = select(in_range, w, constant(wide, -lim, dims(x)));
  return wide == t ? r : g_.add("stablehlo.convert", {r}, Type{t, dims(x)});
}

Value Builder::bitcast_convert(Value a, DType t) {
  return g_.add("stablehlo.bitcast_convert", {a}, Type{t, dims(a)});
}

Value Builder::reshape(Value a, Dims d) {
  if (d == dims(a)) return a;
  Type t{dtype(a), std::move(d)};
  if (t.numel() != type(a).numel())
    throw LoweringError("reshape: cannot reshape " + shape_str(dims(a)) + " to " + shape_str(t.dims));
  return g_.add("stablehlo.reshape", {a}, std::move(t));
}

Value Builder::transpose(Value a, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return a;
  Dims d(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) d[i] = dims(a)[perm[i]];
  return g_.add("stablehlo.transpose", {a}, Type{dtype(a), d}, {Attr::array("permutation", std::move(perm))});
}

Value Builder::broadcast_in_dim(Value a, Dims d, std::vector<int64_t> bdims) {
  if (d == dims(a)) {
    bool identity = true;
    for (size_t i = 0; i < bdims.size(); ++i) identity &= bdims[i] == static_cast<int64_t>(i);
    if (identity) return a;
  }
  return g_.add("stablehlo.broadcast_in_dim", {a}, Type{dtype(a), std::move(d)},
                {Attr::array("broadcast_dimensions", std::move(bdims))});
}

Value Builder::broadcast_to(Value a, const Dims& target) {
  // Copies: `target` may alias a node's dims, which adding nodes can move.
  const Dims d = target;
  const Dims s = dims(a);
  if (s == d) return a;
  if (s.size() > d.size()) throw LoweringError("broadcast: rank of " + shape_str(s) + " exceeds " + shape_str(d));
  size_t off = d.size() - s.size();
  // Size-1 dims that must grow are reshaped away first.
  Dims kept;
  std::vector<int64_t> bdims;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == d[i + off]) {
      kept.push_back(s[i]);
      bdims.push_back(static_cast<int64_t>(i + off));
    } else if (s[i] != 1) {
      throw LoweringError("cannot broadcast " + shape_str(s) + " to " + shape_str(d));
    }
  }
  if (kept.size() != s.size()) a = reshape(a, kept);
  return broadcast_in_dim(a, d, bdims);
}

Value Builder::slice(Value a, Dims start, Dims limit, Dims strides) {
  if (strides.empty()) strides.assign(start.size(), 1);
  Dims out(start.size());
  bool whole = true;
  for (size_t i = 0; i < start.size(); ++i) {
    out[i] = limit[i] <= start[i] ? 0 : (limit[i] - start[i] + strides[i] - 1) / strides[i];
    whole &= start[i] == 0 && limit[i] == dims(a)[i] && strides[i] == 1;
  }
  if (whole) return a;
  return g_.add("stablehlo.slice", {a}, Type{dtype(a), out},
                {Attr::array("start_indices", std::move(start)), Attr::array("limit_indices", std::move(limit)),
                 Attr::array("strides", std::move(strides))});
}

Value Builder::slice_dim(Value a, int64_t dim, int64_t start, int64_t limit, int64_t step) {
  Dims s(rank(a), 0), l = dims(a), st(rank(a), 1);
  s[dim] = start;
  l[dim] = limit;
  st[dim] = step;
  return slice(a, s, l, st);
}

Value Builder::reverse(Value a, std::vector<int64_t> rev) {
  if (rev.empty()) return a;
  for (int64_t d : rev)
    if (d < 0 || d >= rank(a)) throw LoweringError("reverse: dim " + std::to_string(d) + " out of range");
  return g_.add("stablehlo.reverse", {a}, type(a), {Attr::array("dimensions", std::move(rev))});
}

Value Builder::concatenate(const std::vector<Value>& vs, int64_t dim) {
  if (vs.size() == 1) return vs[0];
  Dims out = dims(vs[0]);
  out[dim] = 0;
  for (Value v : vs) out[dim] += dims(v)[dim];
  return g_.add("stablehlo.concatenate", vs, Type{dtype(vs[0]), out}, {Attr::i64("dimension", dim)});
}

Value Builder::pad(Value a, Value pad_value, Dims low, Dims high, Dims interior) {
  if (interior.empty()) interior.assign(low.size(), 0);
  Dims out = dims(a);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = low[i] + high[i] + out[i] + std::max<int64_t>(out[i] - 1, 0) * interior[i];
  return g_.add("stablehlo.pad", {a, pad_value}, Type{dtype(a), out},
                {Attr::array("edge_padding_low", std::move(low)), Attr::array("edge_padding_high", std::move(high)),
                 Attr::array("interior_padding", std::move(interior))});
}

Value Builder::iota(DType t, Dims d, int64_t dim) {
  return g_.add("stablehlo.iota", {}, Type{t, std::move(d)}, {Attr::i64("iota_dimension", dim)});
}

Value Builder::dynamic_update_slice(Value a, Value update, const std::vector<int64_t>& start) {
  std::vector<Value> operands{a, update};
  for (int64_t s : start) operands.push_back(g_.constant(DType::kS64, static_cast<double>(s)));
  return g_.add("stablehlo.dynamic_update_slice", std::move(operands), type(a));
}

Value Builder::dynamic_update_slice_at(Value a, Value update, const std::vector<Value>& starts) {
  if (static_cast<int64_t>(starts.size()) != rank(a) || rank(update) != rank(a))
    throw LoweringError("dynamic_update_slice: one start per dim");
  std::vector<Value> operands{a, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return g_.add("stablehlo.dynamic_update_slice", std::move(operands), type(a));
}

Value Builder::dynamic_slice(Value a, const std::vector<Value>& starts, Dims sizes) {
  if (starts.size() != sizes.size() || static_cast<int64_t>(sizes.size()) != rank(a))
    throw LoweringError("dynamic_slice: one start and one size per dim");
  std::vector<Value> operands{a};
  operands.insert(operands.end(), starts.begin(), starts.end());
  Type result{dtype(a), sizes};
  return g_.add("stablehlo.dynamic_slice", std::move(operands), std::move(result),
                {Attr::array("slice_sizes", std::move(sizes))});
}

// Dims of a rank-`rank` value named by a lowering: each in range, once.
static void check_dims(const char* what, const std::vector<int64_t>& ds, int64_t rank) {
  for (size_t i = 0; i < ds.size(); ++i) {
    if (ds[i] < 0 || ds[i] >= rank)
      throw LoweringError(std::string(what) + ": dimension " + std::to_string(ds[i]) + " out of range for rank " +
                          std::to_string(rank));
    for (size_t j = 0; j < i; ++j)
      if (ds[j] == ds[i]) throw LoweringError(std::string(what) + ": dimension " + std::to_string(ds[i]) + " repeated");
  }
}

Value Builder::reduce(Value a, std::vector<int64_t> rdims, Body body, double init) {
  check_dims("reduce", rdims, rank(a));
  Dims out;
  for (int64_t i = 0; i < rank(a); ++i)
    if (std::find(rdims.begin(), rdims.end(), i) == rdims.end()) out.push_back(dims(a)[i]);
  if (rdims.empty()) return a;
  std::sort(rdims.begin(), rdims.end());
  Value iv = g_.constant(dtype(a), init);
  return g_.add("stablehlo.reduce", {a, iv}, Type{dtype(a), out}, {Attr::array("dimensions", std::move(rdims))}, body);
}

Value Builder::reduce_max(Value a, std::vector<int64_t> d) {
  DType t = dtype(a);
  return reduce(a, std::move(d), t == DType::kBool ? Body::kOr : Body::kMax, lowest(t));
}

Value Builder::reduce_min(Value a, std::vector<int64_t> d) {
  DType t = dtype(a);
  return reduce(a, std::move(d), t == DType::kBool ? Body::kAnd : Body::kMin, highest(t));
}

Value Builder::keepdim(Value reduced, const Dims& full, const std::vector<int64_t>& rdims) {
  check_dims("keepdim", rdims, static_cast<int64_t>(full.size()));
  Dims kd = full;
  for (int64_t d : rdims) kd[d] = 1;
  return reshape(reduced, kd);
}

static std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Value Builder::dot_general(Value a, Value b, std::vector<int64_t> lb, std::vector<int64_t> rb,
                           std::vector<int64_t> lc, std::vector<int64_t> rc, DType result) {
  if (ir::is_float8(dtype(a)) || ir::is_float8(dtype(b)) || ir::is_float8(result))
    return convert(dot_general(convert(a, DType::kF32), convert(b, DType::kF32), std::move(lb), std::move(rb),
                               std::move(lc), std::move(rc), DType::kF32),
                   result);
  Dims out;
  for (int64_t d : lb) out.push_back(dims(a)[d]);
  auto free_dims = [&](Value v, const std::vector<int64_t>& batch, const std::vector<int64_t>& con) {
    for (int64_t i = 0; i < rank(v); ++i)
      if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(con.begin(), con.end(), i) == con.end())
        out.push_back(dims(v)[i]);
  };
  for (size_t i = 0; i < lc.size(); ++i)
    if (dims(a)[lc[i]] != dims(b)[rc[i]])
      throw LoweringError("matmul: contracting sizes differ: " + shape_str(dims(a)) + " and " + shape_str(dims(b)));
  free_dims(a, lb, lc);
  free_dims(b, rb, rc);
  std::string dn = "#stablehlo.dot<";
  std::vector<std::string> parts;
  if (!lb.empty()) {
    parts.push_back("lhs_batching_dimensions = " + int_list(lb));
    parts.push_back("rhs_batching_dimensions = " + int_list(rb));
  }
  parts.push_back("lhs_contracting_dimensions = " + int_list(lc));
  parts.push_back("rhs_contracting_dimensions = " + int_list(rc));
  for (size_t i = 0; i < parts.size(); ++i) dn += (i ? ", " : "") + parts[i];
  dn += ">";
  std::vector<Attr> attrs{Attr::text("dot_dimension_numbers", dn)};
  add_precision(dtype(a), attrs);
  return g_.add("stablehlo.dot_general", {a, b}, Type{result, out}, std::move(attrs));
}

void Builder::add_precision(DType t, std::vector<Attr>& attrs) const {
  if (t != DType::kF32 || precision_ == Precision::kDefault) return;
  const char* p = precision_ == Precision::kHighest ? "#stablehlo<precision HIGHEST>" : "#stablehlo<precision HIGH>";
  attrs.push_back(Attr::text("precision_config", std::string("[") + p + ", " + p + "]"));
}

Value Builder::gather(Value a, Value indices, const std::vector<int64_t>& index_dims,
                      const std::vector<int64_t>& offset_dims, Dims result_dims) {
  Dims slice_sizes = dims(a);
  for (int64_t d : index_dims) slice_sizes[d] = 1;
  std::vector<int64_t> collapsed = index_dims;
  std::sort(collapsed.begin(), collapsed.end());
  std::string dn = "#stablehlo.gather<";
  if (!offset_dims.empty()) dn += "offset_dims = " + int_list(offset_dims) + ", ";
  dn += "collapsed_slice_dims = " + int_list(collapsed) + ", start_index_map = " + int_list(index_dims) +
        ", index_vector_dim = " + std::to_string(rank(indices) - 1) + ">";
  return g_.add("stablehlo.gather", {a, indices}, Type{dtype(a), std::move(result_dims)},
                {Attr::text("dimension_numbers", dn), Attr::array("slice_sizes", slice_sizes),
                 Attr::text("indices_are_sorted", "false")});
}

Value Builder::scatter(Value a, Value indices, Value updates, const std::vector<int64_t>& index_dims,
                       const std::vector<int64_t>& window_dims, Body body) {
  std::vector<int64_t> inserted = index_dims;
  std::sort(inserted.begin(), inserted.end());
  std::string dn = "#stablehlo.scatter<";
  if (!window_dims.empty()) dn += "update_window_dims = " + int_list(window_dims) + ", ";
  dn += "inserted_window_dims = " + int_list(inserted) + ", scatter_dims_to_operand_dims = " +
        int_list(index_dims) + ", index_vector_dim = " + std::to_string(rank(indices) - 1) + ">";
  return g_.add("stablehlo.scatter", {a, indices, updates}, type(a),
                {Attr::text("scatter_dimension_numbers", dn), Attr::text("indices_are_sorted", "false"),
                 Attr::text("unique_indices", "false")},
                body);
}

std::vector<Value> Builder::sort(const std::vector<Value>& operands, int64_t dim, bool descending, bool stable) {
  if (operands.empty()) throw LoweringError("sort: no operands");
  check_dims("sort", {dim}, rank(operands[0]));
  std::vector<Type> results;
  for (Value v : operands) {
    if (dims(v) != dims(operands[0]))
      throw LoweringError("sort: operand shapes differ " + shape_str(dims(operands[0])) + " vs " + shape_str(dims(v)));
    results.push_back(type(v));
  }
  return g_.add_multi("stablehlo.sort", operands, std::move(results),
                      {Attr::i64("dimension", dim), Attr::text("is_stable", stable ? "true" : "false")},
                      descending ? Body::kSortDesc : Body::kSortAsc);
}

Value Builder::triangular_solve(Value a, Value rhs, bool left, bool lower, bool unit_diagonal, bool transpose) {
  const Dims& da = dims(a);
  const Dims& db = dims(rhs);
  const int64_t r = rank(a);
  if (r < 2 || rank(rhs) != r || da[r - 1] != da[r - 2] || dtype(a) != dtype(rhs) ||
      !std::equal(da.begin(), da.end() - 2, db.begin()) || da[r - 1] != db[left ? r - 2 : r - 1])
    throw LoweringError("triangular_solve: bad shapes " + shape_str(da) + " and " + shape_str(db));
  auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
  return g_.add("stablehlo.triangular_solve", {a, rhs}, type(rhs),
                {Attr::text("left_side", flag(left)), Attr::text("lower", flag(lower)),
                 Attr::text("unit_diagonal", flag(unit_diagonal)),
                 Attr::text("transpose_a", transpose ? "#stablehlo<transpose TRANSPOSE>"
                                                     : "#stablehlo<transpose NO_TRANSPOSE>")});
}

Value Builder::cholesky(Value a, bool lower) {
  const Dims& d = dims(a);
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    throw LoweringError("cholesky: expected square matrices, got " + shape_str(d));
  return g_.add("stablehlo.cholesky", {a}, type(a), {Attr::text("lower", lower ? "true" : "false")});
}

std::vector<Value> Builder::while_loop(const std::vector<Value>& init, const LoopCond& cond, const LoopBody& body) {
  std::vector<Type> types;
  for (Value v : init) types.push_back(type(v));
  auto region = [&](auto&& fn, const char* what) {
    auto g = std::make_shared<ir::Graph>();
    Builder rb(*g);
    std::vector<Value> args;
    for (const Type& t : types) args.push_back(g->parameter(t));
    g->outputs = fn(rb, args);
    return std::pair<std::shared_ptr<ir::Graph>, const char*>{g, what};
  };
  auto [c, cw] = region([&](Builder& rb, const std::vector<Value>& a) { return std::vector<Value>{cond(rb, a)}; },
                        "condition");
  auto [bd, bw] = region(body, "body");
  if (c->outputs.size() != 1 || c->type(c->outputs[0]) != Type{DType::kBool, {}})
    throw LoweringError(std::string("while: the ") + cw + " must return one 0-d bool");
  if (bd->outputs.size() != types.size())
    throw LoweringError(std::string("while: the ") + bw + " must return every carried value");
  for (size_t i = 0; i < types.size(); ++i)
    if (bd->type(bd->outputs[i]) != types[i])
      throw LoweringError("while: carried value " + std::to_string(i) + " changes type " + shape_str(types[i].dims) +
                          " -> " + shape_str(bd->type(bd->outputs[i]).dims));
  std::vector<Value> out = g_.add_multi("stablehlo.while", init, types);
  g_.mutable_nodes()[out[0].node].regions = {c, bd};
  return out;
}

}  // namespace torchtpu::ops

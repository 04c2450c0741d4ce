// Elementwise kernels: arithmetic, comparisons, logical ops and unary math,
// with PyTorch's broadcasting and type promotion, in functional, in-place and
// out= forms. (clamp, where and activations: kernels_select.cpp.)
#include <ATen/ScalarOps.h>
#include <limits>
#include <torch/library.h>

#include "aten/opmath.h"
#include "aten/pointwise.h"
#include "ops/elementwise.h"

namespace torchtpu::aten {
namespace {

using ops::Cmp;
using Bin = Value (*)(Builder&, Value, Value);
using Un = Value (*)(Builder&, Value);

// How an op's computation dtype and result dtype follow from the promoted type.
enum class Kind {
  kArith,    // compute and return the promoted type
  kFloat,    // integers promote to the default float type
  kCompare,  // compute in the promoted type, return bool
  kLogical,  // compute in bool, return bool
  kDivide,   // as kArith; an integer divisor of zero raises (ZeroDivisionError)
};

Value l_mul(Builder& b, Value x, Value y);
Value l_div(Builder& b, Value x, Value y);

at::ScalarType compute_type(Kind k, at::ScalarType promoted) {
  if (k == Kind::kLogical) return at::kBool;
  if (k == Kind::kFloat && at::isIntegralType(promoted, /*includeBool=*/true))
    return at::typeMetaToScalarType(at::get_default_dtype());
  return promoted;
}

at::ScalarType result_type(Kind k, at::ScalarType compute) {
  return (k == Kind::kCompare || k == Kind::kLogical) ? at::kBool : compute;
}





at::Tensor binary(const char* op, Kind kind, Bin f, const at::Tensor& a, const at::Tensor& b, Dest dest,
                  const at::Tensor* target = nullptr) {
  c10::Device dev = target ? target->device() : device_of(a, b);
  check_same_device(op, dev, {&a, &b, target});
  const at::ScalarType ct = compute_type(kind, at::result_type(a, b));
  const bool int_divide = kind == Kind::kDivide && at::isIntegralType(ct, /*includeBool=*/true);
  if (int_divide && !b.device().is_privateuseone() && b.dim() == 0)
    TORCH_CHECK(b.item().toLong() != 0, "ZeroDivisionError");
  Kernel k(op, dev);
  Value r;
  try {
    auto [x, y] = binary_operands(k, a, b, ct, /*scalar_in_opmath=*/f == l_mul || f == l_div);
    r = f(k.b(), x, y);
    if (int_divide && b.device().is_privateuseone())
      k.check(k.b().compare(y, k.b().zeros_like(y), Cmp::kEQ), Kernel::CheckKind::kRuntime, "ZeroDivisionError");
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  return finish(k, r, result_type(kind, ct), dest, target);
}

at::Tensor unary(const char* op, Kind kind, Un f, const at::Tensor& a, Dest dest, const at::Tensor* target = nullptr) {
  at::ScalarType ct = compute_type(kind, a.scalar_type());
  Kernel k(op, a);
  if (target) check_same_device(op, a.device(), {target});
  Value r;
  try {
    r = f(k.b(), k.in(a, opmath(ct)));
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  return finish(k, r, result_type(kind, ct), dest, target);
}

// ---- lowerings on promoted values -------------------------------------------

Value l_add(Builder& b, Value x, Value y) {
  return b.dtype(x) == DType::kBool ? b.binary_bcast("stablehlo.or", x, y) : b.add(x, y);
}
Value l_mul(Builder& b, Value x, Value y) {
  return b.dtype(x) == DType::kBool ? b.binary_bcast("stablehlo.and", x, y) : b.mul(x, y);
}
Value l_div(Builder& b, Value x, Value y) { return b.div(x, y); }
Value l_max(Builder& b, Value x, Value y) { return b.max(x, y); }
Value l_min(Builder& b, Value x, Value y) { return b.min(x, y); }
Value l_atan2(Builder& b, Value x, Value y) { return b.binary_bcast("stablehlo.atan2", x, y); }
Value l_fmod(Builder& b, Value x, Value y) { return b.binary_bcast("stablehlo.remainder", x, y); }
Value l_remainder(Builder& b, Value x, Value y) { return ops::remainder(b, x, y); }
Value l_floor_divide(Builder& b, Value x, Value y) { return ops::floor_divide(b, x, y); }
Value l_and(Builder& b, Value x, Value y) { return b.binary_bcast("stablehlo.and", x, y); }
Value l_or(Builder& b, Value x, Value y) { return b.binary_bcast("stablehlo.or", x, y); }
Value l_xor(Builder& b, Value x, Value y) { return b.binary_bcast("stablehlo.xor", x, y); }
template <Cmp C>
Value l_cmp(Builder& b, Value x, Value y) { return b.compare(x, y, C); }

Value l_neg(Builder& b, Value x) { return b.neg(x); }
Value l_abs(Builder& b, Value x) { return b.dtype(x) == DType::kBool ? x : b.unary("stablehlo.abs", x); }
Value l_exp(Builder& b, Value x) { return b.exp(x); }
Value l_log(Builder& b, Value x) { return b.log(x); }
Value l_log2(Builder& b, Value x) { return b.mul_c(b.log(x), 1.0 / M_LN2); }
Value l_log1p(Builder& b, Value x) { return b.unary("stablehlo.log_plus_one", x); }
Value l_expm1(Builder& b, Value x) { return b.unary("stablehlo.exponential_minus_one", x); }
Value l_sqrt(Builder& b, Value x) { return b.sqrt(x); }
Value l_rsqrt(Builder& b, Value x) { return b.rsqrt(x); }
Value l_sin(Builder& b, Value x) { return b.unary("stablehlo.sine", x); }
Value l_cos(Builder& b, Value x) { return b.unary("stablehlo.cosine", x); }
Value l_tanh(Builder& b, Value x) { return b.tanh(x); }
Value l_sigmoid(Builder& b, Value x) { return ops::sigmoid(b, x); }
Value l_erf(Builder& b, Value x) { return ops::erf(b, x); }
Value l_reciprocal(Builder& b, Value x) { return b.div(b.full_like(x, 1.0), x); }
Value l_floor(Builder& b, Value x) { return ir::is_float(b.dtype(x)) ? b.unary("stablehlo.floor", x) : x; }
Value l_ceil(Builder& b, Value x) { return ir::is_float(b.dtype(x)) ? b.unary("stablehlo.ceil", x) : x; }
Value l_round(Builder& b, Value x) {
  return ir::is_float(b.dtype(x)) ? b.unary("stablehlo.round_nearest_even", x) : x;
}
Value l_trunc(Builder& b, Value x) {
  if (!ir::is_float(b.dtype(x))) return x;
  return b.select(b.compare(x, b.zeros_like(x), Cmp::kLT), b.unary("stablehlo.ceil", x), b.unary("stablehlo.floor", x));
}
Value l_sign(Builder& b, Value x) { return ops::sign(b, x); }
Value l_isnan(Builder& b, Value x) {
  return ir::is_float(b.dtype(x)) ? b.compare(x, x, Cmp::kNE) : b.constant(DType::kBool, 0, b.dims(x));
}
template <int Sign>
Value l_isinf_signed(Builder& b, Value x) {
  if (!ir::is_float(b.dtype(x))) return b.constant(DType::kBool, 0, b.dims(x));
  return b.compare(x, b.full_like(x, Sign * std::numeric_limits<double>::infinity()), Cmp::kEQ);
}
Value l_relu(Builder& b, Value x) { return ops::relu(b, x); }
Value l_silu(Builder& b, Value x) { return ops::silu(b, x); }
Value l_not(Builder& b, Value x) { return b.unary("stablehlo.not", x); }
Value l_logical_not(Builder& b, Value x) { return b.unary("stablehlo.not", b.convert(x, DType::kBool)); }

// ---- generated kernel families ----------------------------------------------

#define TPU_BINARY(NAME, SCHEMA, OVL, KIND, FN)                                                         \
  at::Tensor tpu_##NAME(const at::Tensor& a, const at::Tensor& b) {                                      \
    TPU_COUNT("aten::" SCHEMA OVL);                                                                \
    return binary("aten::" SCHEMA, KIND, FN, a, b, Dest::kNew);                                    \
  }                                                                                                \
  [[maybe_unused]] at::Tensor& tpu_##NAME##_(at::Tensor& a, const at::Tensor& b) {                                      \
    TPU_COUNT("aten::" SCHEMA "_" OVL);                                                            \
    binary("aten::" SCHEMA "_", KIND, FN, a, b, Dest::kInplace, &a);                               \
    return a;                                                                                      \
  }                                                                                                \
  at::Tensor& tpu_##NAME##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {              \
    TPU_COUNT("aten::" SCHEMA ".out");                                                             \
    binary("aten::" SCHEMA ".out", KIND, FN, a, b, Dest::kOut, &out);                              \
    return out;                                                                                    \
  }

// The .Scalar overloads of a TPU_BINARY family, for ops whose Scalar forms
// have no composite kernel.
#define TPU_BINARY_SCALAR(NAME)                                                                         \
  at::Tensor tpu_##NAME##_s(const at::Tensor& a, const at::Scalar& b) { return tpu_##NAME(a, wrap(b)); } \
  at::Tensor& tpu_##NAME##_s_(at::Tensor& a, const at::Scalar& b) { return tpu_##NAME##_(a, wrap(b)); }  \
  at::Tensor& tpu_##NAME##_s_out(const at::Tensor& a, const at::Scalar& b, at::Tensor& out) {            \
    return tpu_##NAME##_out(a, wrap(b), out);                                                            \
  }

TPU_BINARY(mul, "mul", ".Tensor", Kind::kArith, l_mul)
TPU_BINARY(div, "div", ".Tensor", Kind::kFloat, l_div)
TPU_BINARY(maximum, "maximum", "", Kind::kArith, l_max)
TPU_BINARY(minimum, "minimum", "", Kind::kArith, l_min)
TPU_BINARY(atan2, "atan2", "", Kind::kFloat, l_atan2)
TPU_BINARY(fmod, "fmod", ".Tensor", Kind::kDivide, l_fmod)
TPU_BINARY(remainder, "remainder", ".Tensor", Kind::kDivide, l_remainder)
TPU_BINARY(floor_divide, "floor_divide", "", Kind::kDivide, l_floor_divide)
TPU_BINARY(bitwise_and, "bitwise_and", ".Tensor", Kind::kArith, l_and)
TPU_BINARY(bitwise_or, "bitwise_or", ".Tensor", Kind::kArith, l_or)
TPU_BINARY(bitwise_xor, "bitwise_xor", ".Tensor", Kind::kArith, l_xor)
TPU_BINARY(logical_and, "logical_and", "", Kind::kLogical, l_and)
TPU_BINARY(logical_or, "logical_or", "", Kind::kLogical, l_or)
TPU_BINARY(logical_xor, "logical_xor", "", Kind::kLogical, l_xor)
TPU_BINARY(eq, "eq", ".Tensor", Kind::kCompare, l_cmp<Cmp::kEQ>)
TPU_BINARY(ne, "ne", ".Tensor", Kind::kCompare, l_cmp<Cmp::kNE>)
TPU_BINARY(lt, "lt", ".Tensor", Kind::kCompare, l_cmp<Cmp::kLT>)
TPU_BINARY(le, "le", ".Tensor", Kind::kCompare, l_cmp<Cmp::kLE>)
TPU_BINARY(gt, "gt", ".Tensor", Kind::kCompare, l_cmp<Cmp::kGT>)
TPU_BINARY(ge, "ge", ".Tensor", Kind::kCompare, l_cmp<Cmp::kGE>)
TPU_BINARY_SCALAR(fmod)
TPU_BINARY_SCALAR(remainder)
TPU_BINARY_SCALAR(eq)
TPU_BINARY_SCALAR(ne)
TPU_BINARY_SCALAR(lt)
TPU_BINARY_SCALAR(le)
TPU_BINARY_SCALAR(gt)
TPU_BINARY_SCALAR(ge)

// pow with integer exponents stays integral; a float exponent promotes.
Value pow_lower(Builder& b, Value x, Value y) {
  return b.binary_bcast("stablehlo.power", x, y);
}
void check_int_pow(const at::Tensor& a, const at::Scalar& e) {
  TORCH_CHECK(!(at::isIntegralType(a.scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
}
at::Tensor pow_ts(const at::Tensor& a, const at::Scalar& e) {
  TPU_COUNT("aten::pow.Tensor_Scalar");
  check_int_pow(a, e);
  at::Tensor w = wrap(e);
  if (e.isFloatingPoint() && e.toDouble() == 2.0) {
    at::ScalarType ct = compute_type(Kind::kArith, at::result_type(a, w));
    Kernel k("aten::pow", a);
    Value x = k.in(a, ct);
    return finish(k, k.b().mul(x, x), ct, Dest::kNew, nullptr);
  }
  return binary("aten::pow", Kind::kArith, pow_lower, a, w, Dest::kNew);
}
at::Tensor& pow_ts_out(const at::Tensor& a, const at::Scalar& e, at::Tensor& out) {
  check_int_pow(a, e);
  binary("aten::pow.Tensor_Scalar_out", Kind::kArith, pow_lower, a, wrap(e), Dest::kOut, &out);
  return out;
}
at::Tensor& pow_ts_(at::Tensor& a, const at::Scalar& e) {
  check_int_pow(a, e);
  binary("aten::pow_.Scalar", Kind::kArith, pow_lower, a, wrap(e), Dest::kInplace, &a);
  return a;
}
at::Tensor pow_tt(const at::Tensor& a, const at::Tensor& e) {
  TPU_COUNT("aten::pow.Tensor_Tensor");
  return binary("aten::pow.Tensor_Tensor", Kind::kArith, pow_lower, a, e, Dest::kNew);
}
at::Tensor& pow_tt_(at::Tensor& a, const at::Tensor& e) {
  binary("aten::pow_.Tensor", Kind::kArith, pow_lower, a, e, Dest::kInplace, &a);
  return a;
}
at::Tensor& pow_tt_out(const at::Tensor& a, const at::Tensor& e, at::Tensor& out) {
  binary("aten::pow.Tensor_Tensor_out", Kind::kArith, pow_lower, a, e, Dest::kOut, &out);
  return out;
}
at::Tensor pow_st(const at::Scalar& base, const at::Tensor& e) {
  TPU_COUNT("aten::pow.Scalar");
  return binary("aten::pow.Scalar", Kind::kArith, pow_lower, wrap(base), e, Dest::kNew);
}

#define TPU_UNARY(NAME, SCHEMA, KIND, FN)                                              \
  at::Tensor tpu_##NAME(const at::Tensor& a) {                                               \
    TPU_COUNT("aten::" SCHEMA);                                                        \
    return unary("aten::" SCHEMA, KIND, FN, a, Dest::kNew);                            \
  }                                                                                    \
  at::Tensor& tpu_##NAME##_(at::Tensor& a) {                                                 \
    TPU_COUNT("aten::" SCHEMA "_");                                                    \
    unary("aten::" SCHEMA "_", KIND, FN, a, Dest::kInplace, &a);                       \
    return a;                                                                          \
  }                                                                                    \
  at::Tensor& tpu_##NAME##_out(const at::Tensor& a, at::Tensor& out) {                       \
    TPU_COUNT("aten::" SCHEMA ".out");                                                 \
    unary("aten::" SCHEMA ".out", KIND, FN, a, Dest::kOut, &out);                      \
    return out;                                                                        \
  }

TPU_UNARY(neg, "neg", Kind::kArith, l_neg)
TPU_UNARY(abs, "abs", Kind::kArith, l_abs)
TPU_UNARY(exp, "exp", Kind::kFloat, l_exp)
TPU_UNARY(log, "log", Kind::kFloat, l_log)
TPU_UNARY(log2, "log2", Kind::kFloat, l_log2)
TPU_UNARY(log1p, "log1p", Kind::kFloat, l_log1p)
TPU_UNARY(expm1, "expm1", Kind::kFloat, l_expm1)
TPU_UNARY(sqrt, "sqrt", Kind::kFloat, l_sqrt)
TPU_UNARY(rsqrt, "rsqrt", Kind::kFloat, l_rsqrt)
TPU_UNARY(sin, "sin", Kind::kFloat, l_sin)
TPU_UNARY(cos, "cos", Kind::kFloat, l_cos)
TPU_UNARY(tanh, "tanh", Kind::kFloat, l_tanh)
TPU_UNARY(sigmoid, "sigmoid", Kind::kFloat, l_sigmoid)
TPU_UNARY(erf, "erf", Kind::kFloat, l_erf)
TPU_UNARY(reciprocal, "reciprocal", Kind::kFloat, l_reciprocal)
TPU_UNARY(floor, "floor", Kind::kArith, l_floor)
TPU_UNARY(ceil, "ceil", Kind::kArith, l_ceil)
TPU_UNARY(round, "round", Kind::kArith, l_round)
TPU_UNARY(trunc, "trunc", Kind::kArith, l_trunc)
TPU_UNARY(sign, "sign", Kind::kArith, l_sign)
TPU_UNARY(sgn, "sgn", Kind::kArith, l_sign)  // real dtypes only: sgn is sign
TPU_UNARY(silu, "silu", Kind::kFloat, l_silu)
TPU_UNARY(bitwise_not, "bitwise_not", Kind::kArith, l_not)
TPU_UNARY(logical_not, "logical_not", Kind::kLogical, l_logical_not)

at::Tensor& isneginf_out(const at::Tensor& a, at::Tensor& out) {
  TPU_COUNT("aten::isneginf.out");
  unary("aten::isneginf.out", Kind::kCompare, l_isinf_signed<-1>, a, Dest::kOut, &out);
  return out;
}
at::Tensor& isposinf_out(const at::Tensor& a, at::Tensor& out) {
  TPU_COUNT("aten::isposinf.out");
  unary("aten::isposinf.out", Kind::kCompare, l_isinf_signed<1>, a, Dest::kOut, &out);
  return out;
}
at::Tensor isnan(const at::Tensor& a) {
  TPU_COUNT("aten::isnan");
  return unary("aten::isnan", Kind::kCompare, l_isnan, a, Dest::kNew);
}
at::Tensor& isnan_out(const at::Tensor& a, at::Tensor& out) {
  TPU_COUNT("aten::isnan.out");
  unary("aten::isnan.out", Kind::kCompare, l_isnan, a, Dest::kOut, &out);
  return out;
}

at::Tensor relu(const at::Tensor& a) {
  TPU_COUNT("aten::relu");
  return unary("aten::relu", Kind::kArith, l_relu, a, Dest::kNew);
}
at::Tensor& relu_(at::Tensor& a) {
  TPU_COUNT("aten::relu_");
  unary("aten::relu_", Kind::kArith, l_relu, a, Dest::kInplace, &a);
  return a;
}

// ---- ops with alpha / value scalars -------------------------------------------

at::Tensor add_sub(const char* op, bool subtract, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                   Dest dest, const at::Tensor* target) {
  c10::Device dev = target ? target->device() : device_of(a, b);
  check_same_device(op, dev, {&a, &b, target});
  at::ScalarType ct = at::result_type(a, b);
  TORCH_CHECK(!(subtract && ct == at::kBool),
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
              "operator instead.");
  TORCH_CHECK(!(subtract && (a.scalar_type() == at::kBool || b.scalar_type() == at::kBool)),
              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead.");
  Kernel k(op, dev);
  Value x = k.in(a, ct), y = k.in(b, ct);
  bool unit = alpha.isIntegral(true) ? alpha.toLong() == 1 : alpha.toDouble() == 1.0;
  if (!unit) y = k.b().mul(y, k.b().broadcast_to(k.scalar(alpha, ct), k.b().dims(y)));
  Value r;
  try {
    r = subtract ? k.b().sub(x, y) : l_add(k.b(), x, y);
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  return finish(k, r, ct, dest, target);
}

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  TPU_COUNT("aten::add.Tensor");
  return add_sub("aten::add", false, a, b, alpha, Dest::kNew, nullptr);
}
at::Tensor& add_(at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  TPU_COUNT("aten::add_.Tensor");
  add_sub("aten::add_", false, a, b, alpha, Dest::kInplace, &a);
  return a;
}
at::Tensor& add_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha, at::Tensor& out) {
  TPU_COUNT("aten::add.out");
  add_sub("aten::add.out", false, a, b, alpha, Dest::kOut, &out);
  return out;
}
at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  TPU_COUNT("aten::sub.Tensor");
  return add_sub("aten::sub", true, a, b, alpha, Dest::kNew, nullptr);
}
at::Tensor& sub_(at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  TPU_COUNT("aten::sub_.Tensor");
  add_sub("aten::sub_", true, a, b, alpha, Dest::kInplace, &a);
  return a;
}
at::Tensor& sub_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha, at::Tensor& out) {
  TPU_COUNT("aten::sub.out");
  add_sub("aten::sub.out", true, a, b, alpha, Dest::kOut, &out);
  return out;
}
at::Tensor rsub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  TPU_COUNT("aten::rsub.Tensor");
  return add_sub("aten::rsub", true, b, a, alpha, Dest::kNew, nullptr);
}

at::Tensor div_mode_impl(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode, Dest dest,
                         const at::Tensor* target) {
  if (!mode) return binary("aten::div", Kind::kFloat, l_div, a, b, dest, target);
  if (*mode == "trunc") {
    return binary(
        "aten::div", Kind::kDivide,
        [](Builder& bb, Value x, Value y) {
          Value q = bb.div(x, y);
          return ir::is_float(bb.dtype(q)) ? l_trunc(bb, q) : q;
        },
        a, b, dest, target);
  }
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode,
              "'");
  return binary("aten::div", Kind::kDivide, l_floor_divide, a, b, dest, target);
}
at::Tensor div_mode(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  TPU_COUNT("aten::div.Tensor_mode");
  return div_mode_impl(a, b, mode, Dest::kNew, nullptr);
}
at::Tensor& div_mode_(at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  TPU_COUNT("aten::div_.Tensor_mode");
  div_mode_impl(a, b, mode, Dest::kInplace, &a);
  return a;
}
at::Tensor& div_mode_out(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode,
                         at::Tensor& out) {
  TPU_COUNT("aten::div.out_mode");
  div_mode_impl(a, b, mode, Dest::kOut, &out);
  return out;
}

// self + value * t1 (op) t2
at::Tensor addc(const char* op, bool divide, const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                const at::Scalar& value, Dest dest, const at::Tensor* target) {
  c10::Device dev = target ? target->device() : self.device();
  check_same_device(op, dev, {&self, &t1, &t2, target});
  at::ScalarType ct = at::promote_types(at::result_type(self, t1), at::result_type(t1, t2));
  if (divide && at::isIntegralType(ct, true)) ct = at::typeMetaToScalarType(at::get_default_dtype());
  Kernel k(op, dev);
  Builder& b = k.b();
  // As PyTorch's CPU kernel: (value * t1) op t2, 16-bit floats in float32.
  const at::ScalarType mt = opmath(ct);
  Value x = k.in(self, mt), y1 = k.in(t1, mt), y2 = k.in(t2, mt);
  Value scaled = b.mul(b.broadcast_to(k.scalar(value, mt), b.dims(y1)), y1);
  Value r = divide ? b.div(scaled, y2) : b.mul(scaled, y2);
  return finish(k, b.add(x, r), ct, dest, target);
}
at::Tensor addcmul(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v) {
  TPU_COUNT("aten::addcmul");
  return addc("aten::addcmul", false, s, a, b, v, Dest::kNew, nullptr);
}
at::Tensor& addcmul_(at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v) {
  TPU_COUNT("aten::addcmul_");
  addc("aten::addcmul_", false, s, a, b, v, Dest::kInplace, &s);
  return s;
}
at::Tensor& addcmul_out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v,
                        at::Tensor& out) {
  TPU_COUNT("aten::addcmul.out");
  addc("aten::addcmul.out", false, s, a, b, v, Dest::kOut, &out);
  return out;
}
at::Tensor addcdiv(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v) {
  TPU_COUNT("aten::addcdiv");
  return addc("aten::addcdiv", true, s, a, b, v, Dest::kNew, nullptr);
}
at::Tensor& addcdiv_(at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v) {
  TPU_COUNT("aten::addcdiv_");
  addc("aten::addcdiv_", true, s, a, b, v, Dest::kInplace, &s);
  return s;
}
at::Tensor& addcdiv_out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v,
                        at::Tensor& out) {
  TPU_COUNT("aten::addcdiv.out");
  addc("aten::addcdiv.out", true, s, a, b, v, Dest::kOut, &out);
  return out;
}


}  // namespace

#define TPU_REG_BINARY(NAME, SCHEMA, OUT)                  \
  m.impl(SCHEMA ".Tensor", TORCH_FN(tpu_##NAME));                \
  m.impl(SCHEMA "_.Tensor", TORCH_FN(tpu_##NAME##_));            \
  m.impl(SCHEMA OUT, TORCH_FN(tpu_##NAME##_out));
#define TPU_REG_BINARY_PLAIN(NAME, SCHEMA)                 \
  m.impl(SCHEMA, TORCH_FN(tpu_##NAME));                          \
  m.impl(SCHEMA "_", TORCH_FN(tpu_##NAME##_));                   \
  m.impl(SCHEMA ".out", TORCH_FN(tpu_##NAME##_out));
#define TPU_REG_SCALAR(NAME, SCHEMA)                       \
  m.impl(SCHEMA ".Scalar", TORCH_FN(tpu_##NAME##_s));            \
  m.impl(SCHEMA "_.Scalar", TORCH_FN(tpu_##NAME##_s_));          \
  m.impl(SCHEMA ".Scalar_out", TORCH_FN(tpu_##NAME##_s_out));
#define TPU_REG_UNARY(NAME, SCHEMA)                        \
  m.impl(SCHEMA, TORCH_FN(tpu_##NAME));                          \
  m.impl(SCHEMA "_", TORCH_FN(tpu_##NAME##_));                   \
  m.impl(SCHEMA ".out", TORCH_FN(tpu_##NAME##_out));

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add_.Tensor", TORCH_FN(add_));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("sub_.Tensor", TORCH_FN(sub_));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("rsub.Tensor", TORCH_FN(rsub));
  TPU_REG_BINARY(mul, "mul", ".out")
  TPU_REG_BINARY(div, "div", ".out")
  m.impl("div.Tensor_mode", TORCH_FN(div_mode));
  m.impl("div_.Tensor_mode", TORCH_FN(div_mode_));
  m.impl("div.out_mode", TORCH_FN(div_mode_out));
  m.impl("maximum", TORCH_FN(tpu_maximum));
  m.impl("maximum.out", TORCH_FN(tpu_maximum_out));
  m.impl("minimum", TORCH_FN(tpu_minimum));
  m.impl("minimum.out", TORCH_FN(tpu_minimum_out));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_ts));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_ts_out));
  m.impl("pow_.Scalar", TORCH_FN(pow_ts_));
  m.impl("pow.Tensor_Tensor", TORCH_FN(pow_tt));
  m.impl("pow_.Tensor", TORCH_FN(pow_tt_));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(pow_tt_out));
  m.impl("pow.Scalar", TORCH_FN(pow_st));
  TPU_REG_BINARY_PLAIN(atan2, "atan2")
  TPU_REG_BINARY(fmod, "fmod", ".Tensor_out")
  TPU_REG_SCALAR(fmod, "fmod")
  TPU_REG_BINARY(remainder, "remainder", ".Tensor_out")
  TPU_REG_SCALAR(remainder, "remainder")
  m.impl("floor_divide", TORCH_FN(tpu_floor_divide));
  m.impl("floor_divide_.Tensor", TORCH_FN(tpu_floor_divide_));
  m.impl("floor_divide.out", TORCH_FN(tpu_floor_divide_out));
  TPU_REG_BINARY(bitwise_and, "bitwise_and", ".Tensor_out")
  TPU_REG_BINARY(bitwise_or, "bitwise_or", ".Tensor_out")
  TPU_REG_BINARY(bitwise_xor, "bitwise_xor", ".Tensor_out")
  TPU_REG_BINARY_PLAIN(logical_and, "logical_and")
  TPU_REG_BINARY_PLAIN(logical_or, "logical_or")
  TPU_REG_BINARY_PLAIN(logical_xor, "logical_xor")
  TPU_REG_BINARY(eq, "eq", ".Tensor_out")
  TPU_REG_BINARY(ne, "ne", ".Tensor_out")
  TPU_REG_BINARY(lt, "lt", ".Tensor_out")
  TPU_REG_BINARY(le, "le", ".Tensor_out")
  TPU_REG_BINARY(gt, "gt", ".Tensor_out")
  TPU_REG_BINARY(ge, "ge", ".Tensor_out")
  TPU_REG_SCALAR(eq, "eq")
  TPU_REG_SCALAR(ne, "ne")
  TPU_REG_SCALAR(lt, "lt")
  TPU_REG_SCALAR(le, "le")
  TPU_REG_SCALAR(gt, "gt")
  TPU_REG_SCALAR(ge, "ge")
  TPU_REG_UNARY(neg, "neg")
  TPU_REG_UNARY(abs, "abs")
  TPU_REG_UNARY(exp, "exp")
  TPU_REG_UNARY(log, "log")
  TPU_REG_UNARY(log2, "log2")
  TPU_REG_UNARY(log1p, "log1p")
  TPU_REG_UNARY(expm1, "expm1")
  TPU_REG_UNARY(sqrt, "sqrt")
  TPU_REG_UNARY(rsqrt, "rsqrt")
  TPU_REG_UNARY(sin, "sin")
  TPU_REG_UNARY(cos, "cos")
  TPU_REG_UNARY(tanh, "tanh")
  TPU_REG_UNARY(sigmoid, "sigmoid")
  TPU_REG_UNARY(erf, "erf")
  TPU_REG_UNARY(reciprocal, "reciprocal")
  TPU_REG_UNARY(floor, "floor")
  TPU_REG_UNARY(ceil, "ceil")
  TPU_REG_UNARY(round, "round")
  TPU_REG_UNARY(trunc, "trunc")
  TPU_REG_UNARY(sign, "sign")
  TPU_REG_UNARY(sgn, "sgn")
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("isneginf.out", TORCH_FN(isneginf_out));
  m.impl("isposinf.out", TORCH_FN(isposinf_out));
  m.impl("isnan.out", TORCH_FN(isnan_out));
  TPU_REG_UNARY(silu, "silu")
  TPU_REG_UNARY(bitwise_not, "bitwise_not")
  TPU_REG_UNARY(logical_not, "logical_not")
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul_", TORCH_FN(addcmul_));
  m.impl("addcmul.out", TORCH_FN(addcmul_out));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv_", TORCH_FN(addcdiv_));
  m.impl("addcdiv.out", TORCH_FN(addcdiv_out));
}

}  // namespace torchtpu::aten

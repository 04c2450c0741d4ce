// Elementwise kernels: arithmetic, comparisons, logical ops and unary math,
// with PyTorch's broadcasting and type promotion, in functional, in-place and
// out= forms. (clamp, where and activations: kernels_select.cpp.)
#include <ATen/ScalarOps.h>
#include <limits>

#include "aten/registry.h"
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
Value l_abs(Builder& b, Value x);

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
  c10::Device dev = target && target->defined() ? target->device() : device_of(a, b);
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
  k.elementwise({&a});
  Value r;
  try {
    r = f(k.b(), k.in(a, opmath(ct)));
  } catch (const ops::LoweringError& e) {
    rethrow_lowering(op, e);
  }
  // abs of a complex tensor is real, as PyTorch's.
  const at::ScalarType rt = f == l_abs ? c10::toRealValueType(result_type(kind, ct)) : result_type(kind, ct);
  return finish(k, r, rt, dest, target);
}

// ---- lowerings on promoted values -------------------------------------------

Value l_add(Builder& b, Value x, Value y) {
  return b.dtype(x) == DType::kBool ? b.logical_or(x, y) : b.add(x, y);
}
Value l_mul(Builder& b, Value x, Value y) {
  return b.dtype(x) == DType::kBool ? b.logical_and(x, y) : b.mul(x, y);
}
Value l_div(Builder& b, Value x, Value y) { return b.div(x, y); }
Value l_max(Builder& b, Value x, Value y) { return b.max(x, y); }
Value l_min(Builder& b, Value x, Value y) { return b.min(x, y); }
Value l_atan2(Builder& b, Value x, Value y) { return b.atan2(x, y); }
Value l_fmod(Builder& b, Value x, Value y) { return b.rem(x, y); }
Value l_remainder(Builder& b, Value x, Value y) { return ops::remainder(b, x, y); }
Value l_floor_divide(Builder& b, Value x, Value y) { return ops::floor_divide(b, x, y); }
Value l_and(Builder& b, Value x, Value y) { return b.logical_and(x, y); }
Value l_or(Builder& b, Value x, Value y) { return b.logical_or(x, y); }
Value l_xor(Builder& b, Value x, Value y) { return b.logical_xor(x, y); }
template <Cmp C>
Value l_cmp(Builder& b, Value x, Value y) { return b.compare(x, y, C); }

Value l_neg(Builder& b, Value x) { return b.neg(x); }
Value l_abs(Builder& b, Value x) { return b.dtype(x) == DType::kBool ? x : b.abs(x); }
Value l_exp(Builder& b, Value x) { return b.exp(x); }
Value l_log(Builder& b, Value x) { return b.log(x); }
Value l_log2(Builder& b, Value x) { return b.mul_c(b.log(x), 1.0 / M_LN2); }
Value l_log1p(Builder& b, Value x) { return ops::log1p(b, x); }
Value l_expm1(Builder& b, Value x) { return b.expm1(x); }
Value l_sqrt(Builder& b, Value x) { return b.sqrt(x); }
Value l_rsqrt(Builder& b, Value x) { return b.rsqrt(x); }
Value l_sin(Builder& b, Value x) { return b.sin(x); }
Value l_cos(Builder& b, Value x) { return b.cos(x); }
Value l_tanh(Builder& b, Value x) { return b.tanh(x); }
Value l_sigmoid(Builder& b, Value x) { return ops::sigmoid(b, x); }
Value l_erf(Builder& b, Value x) { return ops::erf(b, x); }
Value l_reciprocal(Builder& b, Value x) { return b.div(b.full_like(x, 1.0), x); }
Value l_floor(Builder& b, Value x) { return ir::is_float(b.dtype(x)) ? b.floor(x) : x; }
Value l_ceil(Builder& b, Value x) { return ir::is_float(b.dtype(x)) ? b.ceil(x) : x; }
Value l_round(Builder& b, Value x) {
  return ir::is_float(b.dtype(x)) ? b.round_even(x) : x;
}
Value l_trunc(Builder& b, Value x) {
  if (!ir::is_float(b.dtype(x))) return x;
  return b.select(b.compare(x, b.zeros_like(x), Cmp::kLT), b.ceil(x), b.floor(x));
}
Value l_sign(Builder& b, Value x) { return ir::is_complex(b.dtype(x)) ? complex_sgn(b, x) : ops::sign(b, x); }
Value l_isnan(Builder& b, Value x) {
  if (ir::is_complex(b.dtype(x))) return b.logical_or(l_isnan(b, b.real(x)), l_isnan(b, b.imag(x)));
  return ir::is_float(b.dtype(x)) ? b.compare(x, x, Cmp::kNE) : b.constant(DType::kBool, 0, b.dims(x));
}
template <int Sign>
Value l_isinf_signed(Builder& b, Value x) {
  if (!ir::is_float(b.dtype(x))) return b.constant(DType::kBool, 0, b.dims(x));
  return b.compare(x, b.full_like(x, Sign * std::numeric_limits<double>::infinity()), Cmp::kEQ);
}
Value l_relu(Builder& b, Value x) { return ops::relu(b, x); }
Value l_silu(Builder& b, Value x) { return ops::silu(b, x); }
Value l_not(Builder& b, Value x) { return b.logical_not(x); }
Value l_logical_not(Builder& b, Value x) { return b.logical_not(b.convert(x, DType::kBool)); }

// ---- generated kernel families ----------------------------------------------

// The out= kernel of a binary op; registration derives the functional and
// in-place forms from it (registry.h).
#define TPU_BINARY(NAME, SCHEMA, KIND, FN)                                                 \
  at::Tensor& tpu_##NAME##_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { \
    binary("aten::" SCHEMA ".out", KIND, FN, a, b, Dest::kOut, &out);                    \
    return out;                                                                          \
  }

// The .Scalar_out overload of a TPU_BINARY op, for ops whose Scalar forms
// have no composite kernel.
#define TPU_BINARY_SCALAR(NAME)                                                            \
  at::Tensor& tpu_##NAME##_s_out(const at::Tensor& a, const at::Scalar& b, at::Tensor& out) { \
    return tpu_##NAME##_out(a, wrap(b), out);                                               \
  }

TPU_BINARY(mul, "mul", Kind::kArith, l_mul)
TPU_BINARY(div, "div", Kind::kFloat, l_div)
TPU_BINARY(maximum, "maximum", Kind::kArith, l_max)
TPU_BINARY(minimum, "minimum", Kind::kArith, l_min)
TPU_BINARY(atan2, "atan2", Kind::kFloat, l_atan2)
TPU_BINARY(fmod, "fmod", Kind::kDivide, l_fmod)
TPU_BINARY(remainder, "remainder", Kind::kDivide, l_remainder)
TPU_BINARY(floor_divide, "floor_divide", Kind::kDivide, l_floor_divide)
TPU_BINARY(bitwise_and, "bitwise_and", Kind::kArith, l_and)
TPU_BINARY(bitwise_or, "bitwise_or", Kind::kArith, l_or)
TPU_BINARY(bitwise_xor, "bitwise_xor", Kind::kArith, l_xor)
TPU_BINARY(logical_and, "logical_and", Kind::kLogical, l_and)
TPU_BINARY(logical_or, "logical_or", Kind::kLogical, l_or)
TPU_BINARY(logical_xor, "logical_xor", Kind::kLogical, l_xor)
TPU_BINARY(eq, "eq", Kind::kCompare, l_cmp<Cmp::kEQ>)
TPU_BINARY(ne, "ne", Kind::kCompare, l_cmp<Cmp::kNE>)
TPU_BINARY(lt, "lt", Kind::kCompare, l_cmp<Cmp::kLT>)
TPU_BINARY(le, "le", Kind::kCompare, l_cmp<Cmp::kLE>)
TPU_BINARY(gt, "gt", Kind::kCompare, l_cmp<Cmp::kGT>)
TPU_BINARY(ge, "ge", Kind::kCompare, l_cmp<Cmp::kGE>)
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
  return b.pow(x, y);
}
void check_int_pow(const at::Tensor& a, const at::Scalar& e) {
  TORCH_CHECK(!(at::isIntegralType(a.scalar_type(), true) && e.isIntegral(true) && e.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
}
// The exponents PyTorch's CPU kernel computes without pow (PowKernel.cpp), in
// float32, float64 and bfloat16 (float16 uses pow): 0.5, -0.5 and -1 as sqrt,
// rsqrt and reciprocal; 2, 3 and -2 as products, each rounded to the dtype.
bool pow_special(const at::Tensor& a, const at::Scalar& e, at::Tensor& out) {
  if (e.isComplex()) return false;
  const at::ScalarType ct = compute_type(Kind::kArith, at::result_type(a, wrap(e)));
  if (ct != at::kFloat && ct != at::kDouble && ct != at::kBFloat16) return false;
  const double x = e.toDouble();
  const char* op = "aten::pow.Tensor_Scalar_out";
  if (x == 0.5 || x == -0.5 || x == -1.0) {
    unary(op, Kind::kFloat, x == 0.5 ? l_sqrt : x == -0.5 ? l_rsqrt : l_reciprocal, a, Dest::kOut, &out);
    return true;
  }
  if (x != 2.0 && x != 3.0 && x != -2.0) return false;
  Kernel k(op, a);
  k.elementwise({&a});
  Builder& b = k.b();
  const at::ScalarType mt = opmath(ct);
  Value v = k.in(a, mt);
  Value sq = b.mul(v, v);
  if (mt != ct) sq = b.convert(b.convert(sq, to_ir(ct)), to_ir(mt));
  Value r = x == 2.0 ? sq : x == 3.0 ? b.mul(sq, v) : b.div(b.full_like(sq, 1.0), sq);
  finish(k, r, ct, Dest::kOut, &out);
  return true;
}
at::Tensor& pow_ts_out(const at::Tensor& a, const at::Scalar& e, at::Tensor& out) {
  check_int_pow(a, e);
  if (pow_special(a, e, out)) return out;
  binary("aten::pow.Tensor_Scalar_out", Kind::kArith, pow_lower, a, wrap(e), Dest::kOut, &out);
  return out;
}
at::Tensor& pow_tt_out(const at::Tensor& a, const at::Tensor& e, at::Tensor& out) {
  binary("aten::pow.Tensor_Tensor_out", Kind::kArith, pow_lower, a, e, Dest::kOut, &out);
  return out;
}
// remainder with a Python number first (`5 % t`), as the CPU's.
at::Tensor remainder_st(const at::Scalar& a, const at::Tensor& b) {
  return binary("aten::remainder.Scalar_Tensor", Kind::kDivide, l_remainder, wrap(a), b, Dest::kNew);
}
at::Tensor pow_st(const at::Scalar& base, const at::Tensor& e) {
  return binary("aten::pow.Scalar", Kind::kArith, pow_lower, wrap(base), e, Dest::kNew);
}

// The out= kernel of a unary op (functional and in-place forms derived).
#define TPU_UNARY(NAME, SCHEMA, KIND, FN)                              \
  at::Tensor& tpu_##NAME##_out(const at::Tensor& a, at::Tensor& out) { \
    unary("aten::" SCHEMA ".out", KIND, FN, a, Dest::kOut, &out);      \
    return out;                                                        \
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
TPU_UNARY(sgn, "sgn", Kind::kArith, l_sign)  // real dtypes: sign; complex: z / |z|
TPU_UNARY(silu, "silu", Kind::kFloat, l_silu)
TPU_UNARY(bitwise_not, "bitwise_not", Kind::kArith, l_not)
TPU_UNARY(logical_not, "logical_not", Kind::kLogical, l_logical_not)

at::Tensor& isneginf_out(const at::Tensor& a, at::Tensor& out) {
  unary("aten::isneginf.out", Kind::kCompare, l_isinf_signed<-1>, a, Dest::kOut, &out);
  return out;
}
at::Tensor& isposinf_out(const at::Tensor& a, at::Tensor& out) {
  unary("aten::isposinf.out", Kind::kCompare, l_isinf_signed<1>, a, Dest::kOut, &out);
  return out;
}
at::Tensor& isnan_out(const at::Tensor& a, at::Tensor& out) {
  unary("aten::isnan.out", Kind::kCompare, l_isnan, a, Dest::kOut, &out);
  return out;
}

at::Tensor relu(const at::Tensor& a) {
  return unary("aten::relu", Kind::kArith, l_relu, a, Dest::kNew);
}
at::Tensor& relu_(at::Tensor& a) {
  unary("aten::relu_", Kind::kArith, l_relu, a, Dest::kInplace, &a);
  return a;
}

// ---- ops with alpha / value scalars -------------------------------------------

at::Tensor add_sub(const char* op, bool subtract, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                   Dest dest, const at::Tensor* target) {
  c10::Device dev = target && target->defined() ? target->device() : device_of(a, b);
  at::ScalarType ct = at::result_type(a, b);
  TORCH_CHECK(!(subtract && ct == at::kBool),
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
              "operator instead.");
  TORCH_CHECK(!(subtract && (a.scalar_type() == at::kBool || b.scalar_type() == at::kBool)),
              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead.");
  Kernel k(op, dev);
  k.elementwise({&a, &b});
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

at::Tensor& add_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha, at::Tensor& out) {
  add_sub("aten::add.out", false, a, b, alpha, Dest::kOut, &out);
  return out;
}
at::Tensor& sub_out(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha, at::Tensor& out) {
  add_sub("aten::sub.out", true, a, b, alpha, Dest::kOut, &out);
  return out;
}
at::Tensor rsub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
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
at::Tensor& div_mode_out(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode,
                         at::Tensor& out) {
  div_mode_impl(a, b, mode, Dest::kOut, &out);
  return out;
}

// self + value * t1 (op) t2
at::Tensor addc(const char* op, bool divide, const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                const at::Scalar& value, Dest dest, const at::Tensor* target) {
  c10::Device dev = target && target->defined() ? target->device() : self.device();
  // PyTorch's message, word for word.
  TORCH_CHECK(!divide || !at::isIntegralType(t1.scalar_type(), true) || !at::isIntegralType(t2.scalar_type(), true),
              "Integer division with addcdiv is no longer supported, and in a future  ",
              "release addcdiv will perform a true division of tensor1 and tensor2. ",
              "The historic addcdiv behavior can be implemented as ",
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ", "for integer inputs and as ",
              "(input + value * tensor1 / tensor2) for float inputs. ",
              "The future addcdiv behavior is just the latter implementation: ",
              "(input + value * tensor1 / tensor2), for all dtypes.");
  at::ScalarType ct = at::promote_types(at::result_type(self, t1), at::result_type(t1, t2));
  if (divide && at::isIntegralType(ct, true)) ct = at::typeMetaToScalarType(at::get_default_dtype());
  Kernel k(op, dev);
  k.elementwise({&self, &t1, &t2});
  Builder& b = k.b();
  // As PyTorch's CPU kernel: (value * t1) op t2, 16-bit floats in float32.
  const at::ScalarType mt = opmath(ct);
  Value x = k.in(self, mt), y1 = k.in(t1, mt), y2 = k.in(t2, mt);
  Value scaled = b.mul(b.broadcast_to(k.scalar(value, mt), b.dims(y1)), y1);
  Value r = divide ? b.div(scaled, y2) : b.mul(scaled, y2);
  return finish(k, b.add(x, r), ct, dest, target);
}
at::Tensor& addcmul_out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v,
                        at::Tensor& out) {
  addc("aten::addcmul.out", false, s, a, b, v, Dest::kOut, &out);
  return out;
}
at::Tensor& addcdiv_out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, const at::Scalar& v,
                        at::Tensor& out) {
  addc("aten::addcdiv.out", true, s, a, b, v, Dest::kOut, &out);
  return out;
}


}  // namespace

TPU_KERNELS(m) {
  m.out("add.out", TORCH_FN(add_out), "add.Tensor", "add_.Tensor");
  m.out("sub.out", TORCH_FN(sub_out), "sub.Tensor", "sub_.Tensor");
  m.impl("rsub.Tensor", TORCH_FN(rsub));
  m.out("mul.out", TORCH_FN(tpu_mul_out), "mul.Tensor", "mul_.Tensor");
  m.out("div.out", TORCH_FN(tpu_div_out), "div.Tensor", "div_.Tensor");
  m.out("div.out_mode", TORCH_FN(div_mode_out), "div.Tensor_mode", "div_.Tensor_mode");
  m.out("maximum.out", TORCH_FN(tpu_maximum_out), "maximum");
  m.out("minimum.out", TORCH_FN(tpu_minimum_out), "minimum");
  m.out("pow.Tensor_Scalar_out", TORCH_FN(pow_ts_out), "pow.Tensor_Scalar", "pow_.Scalar");
  m.out("pow.Tensor_Tensor_out", TORCH_FN(pow_tt_out), "pow.Tensor_Tensor", "pow_.Tensor");
  m.impl("pow.Scalar", TORCH_FN(pow_st));
  m.impl("remainder.Scalar_Tensor", TORCH_FN(remainder_st));
  m.out("atan2.out", TORCH_FN(tpu_atan2_out), "atan2", "atan2_");
  m.out("fmod.Tensor_out", TORCH_FN(tpu_fmod_out), "fmod.Tensor", "fmod_.Tensor");
  m.out("fmod.Scalar_out", TORCH_FN(tpu_fmod_s_out), "fmod.Scalar", "fmod_.Scalar");
  m.out("remainder.Tensor_out", TORCH_FN(tpu_remainder_out), "remainder.Tensor", "remainder_.Tensor");
  m.out("remainder.Scalar_out", TORCH_FN(tpu_remainder_s_out), "remainder.Scalar", "remainder_.Scalar");
  m.out("floor_divide.out", TORCH_FN(tpu_floor_divide_out), "floor_divide", "floor_divide_.Tensor");
  m.out("bitwise_and.Tensor_out", TORCH_FN(tpu_bitwise_and_out), "bitwise_and.Tensor", "bitwise_and_.Tensor");
  m.out("bitwise_or.Tensor_out", TORCH_FN(tpu_bitwise_or_out), "bitwise_or.Tensor", "bitwise_or_.Tensor");
  m.out("bitwise_xor.Tensor_out", TORCH_FN(tpu_bitwise_xor_out), "bitwise_xor.Tensor", "bitwise_xor_.Tensor");
  m.out("logical_and.out", TORCH_FN(tpu_logical_and_out), "logical_and", "logical_and_");
  m.out("logical_or.out", TORCH_FN(tpu_logical_or_out), "logical_or", "logical_or_");
  m.out("logical_xor.out", TORCH_FN(tpu_logical_xor_out), "logical_xor", "logical_xor_");
  m.out("eq.Tensor_out", TORCH_FN(tpu_eq_out), "eq.Tensor", "eq_.Tensor");
  m.out("ne.Tensor_out", TORCH_FN(tpu_ne_out), "ne.Tensor", "ne_.Tensor");
  m.out("lt.Tensor_out", TORCH_FN(tpu_lt_out), "lt.Tensor", "lt_.Tensor");
  m.out("le.Tensor_out", TORCH_FN(tpu_le_out), "le.Tensor", "le_.Tensor");
  m.out("gt.Tensor_out", TORCH_FN(tpu_gt_out), "gt.Tensor", "gt_.Tensor");
  m.out("ge.Tensor_out", TORCH_FN(tpu_ge_out), "ge.Tensor", "ge_.Tensor");
  m.out("eq.Scalar_out", TORCH_FN(tpu_eq_s_out), "eq.Scalar", "eq_.Scalar");
  m.out("ne.Scalar_out", TORCH_FN(tpu_ne_s_out), "ne.Scalar", "ne_.Scalar");
  m.out("lt.Scalar_out", TORCH_FN(tpu_lt_s_out), "lt.Scalar", "lt_.Scalar");
  m.out("le.Scalar_out", TORCH_FN(tpu_le_s_out), "le.Scalar", "le_.Scalar");
  m.out("gt.Scalar_out", TORCH_FN(tpu_gt_s_out), "gt.Scalar", "gt_.Scalar");
  m.out("ge.Scalar_out", TORCH_FN(tpu_ge_s_out), "ge.Scalar", "ge_.Scalar");
  m.out("neg.out", TORCH_FN(tpu_neg_out), "neg", "neg_");
  m.out("abs.out", TORCH_FN(tpu_abs_out), "abs", "abs_");
  m.out("exp.out", TORCH_FN(tpu_exp_out), "exp", "exp_");
  m.out("log.out", TORCH_FN(tpu_log_out), "log", "log_");
  m.out("log2.out", TORCH_FN(tpu_log2_out), "log2", "log2_");
  m.out("log1p.out", TORCH_FN(tpu_log1p_out), "log1p", "log1p_");
  m.out("expm1.out", TORCH_FN(tpu_expm1_out), "expm1", "expm1_");
  m.out("sqrt.out", TORCH_FN(tpu_sqrt_out), "sqrt", "sqrt_");
  m.out("rsqrt.out", TORCH_FN(tpu_rsqrt_out), "rsqrt", "rsqrt_");
  m.out("sin.out", TORCH_FN(tpu_sin_out), "sin", "sin_");
  m.out("cos.out", TORCH_FN(tpu_cos_out), "cos", "cos_");
  m.out("tanh.out", TORCH_FN(tpu_tanh_out), "tanh", "tanh_");
  m.out("sigmoid.out", TORCH_FN(tpu_sigmoid_out), "sigmoid", "sigmoid_");
  m.out("erf.out", TORCH_FN(tpu_erf_out), "erf", "erf_");
  m.out("reciprocal.out", TORCH_FN(tpu_reciprocal_out), "reciprocal", "reciprocal_");
  m.out("floor.out", TORCH_FN(tpu_floor_out), "floor", "floor_");
  m.out("ceil.out", TORCH_FN(tpu_ceil_out), "ceil", "ceil_");
  m.out("round.out", TORCH_FN(tpu_round_out), "round", "round_");
  m.out("trunc.out", TORCH_FN(tpu_trunc_out), "trunc", "trunc_");
  m.out("sign.out", TORCH_FN(tpu_sign_out), "sign", "sign_");
  m.out("sgn.out", TORCH_FN(tpu_sgn_out), "sgn", "sgn_");
  m.out("silu.out", TORCH_FN(tpu_silu_out), "silu", "silu_");
  m.out("bitwise_not.out", TORCH_FN(tpu_bitwise_not_out), "bitwise_not", "bitwise_not_");
  m.out("logical_not.out", TORCH_FN(tpu_logical_not_out), "logical_not", "logical_not_");
  m.out("isnan.out", TORCH_FN(isnan_out), "isnan");
  m.out("isneginf.out", TORCH_FN(isneginf_out), "isneginf");
  m.out("isposinf.out", TORCH_FN(isposinf_out), "isposinf");
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
  m.out("addcmul.out", TORCH_FN(addcmul_out), "addcmul", "addcmul_");
  m.out("addcdiv.out", TORCH_FN(addcdiv_out), "addcdiv", "addcdiv_");
}

// New elementwise outputs take TensorIterator's strides (tensor_ir.h).
std::vector<int64_t> iterator_strides(at::IntArrayRef shape, c10::ArrayRef<const at::Tensor*> inputs) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd < 2 || inputs.empty()) return {};
  // Fast setup: inputs of the output's shape, dense, with one set of strides
  // give the output those strides.
  bool same = true;
  for (const at::Tensor* t : inputs)
    same &= t->sizes().equals(shape) && t->is_non_overlapping_and_dense() && t->strides().equals(inputs[0]->strides());
  if (same) return inputs[0]->is_contiguous() ? std::vector<int64_t>{} : inputs[0]->strides().vec();
  // Per input, its strides aligned to the output's dims; 0 where broadcast.
  std::vector<std::vector<int64_t>> strides;
  for (const at::Tensor* p : inputs) {
    const at::Tensor& t = *p;
    const int64_t off = nd - t.dim();
    if (off < 0) return {};
    std::vector<int64_t> st(nd, 0);
    for (int64_t i = 0; i < t.dim(); ++i) {
      if (t.size(i) != shape[off + i] && t.size(i) != 1) return {};  // not elementwise over `shape`
      st[off + i] = (t.size(i) == 1 && shape[off + i] != 1) ? 0 : t.stride(i);
    }
    strides.push_back(std::move(st));
  }
  // 1 when dim0 goes inside dim1, -1 when outside, 0 when no input decides.
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (const auto& st : strides) {
      if (st[d0] == 0 || st[d1] == 0) continue;
      if (st[d0] != st[d1]) return st[d0] < st[d1] ? -1 : 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(nd);  // innermost first
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (int64_t i = 1; i < nd; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool rowmajor = true;
  for (int64_t i = 0; i < nd; ++i) rowmajor &= perm[i] == nd - 1 - i;
  if (rowmajor) return {};
  std::vector<int64_t> out(nd);
  int64_t next = 1;
  for (int64_t i = 0; i < nd; ++i) {
    out[perm[i]] = next;
    next *= shape[perm[i]];
  }
  return out;
}

}  // namespace torchtpu::aten

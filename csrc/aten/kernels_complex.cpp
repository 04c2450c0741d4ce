// Complex tensors: the views between complex values and their (re, im)
// pairs, complex values built from parts (complex, polar), and the FFT
// family through stablehlo.fft. A complex tensor is stored as PyTorch
// stores it, (re, im) pairs, in a c64 / c128 device buffer; which other
// kernels accept complex operands is complex_supported()'s list.
#include <ATen/native/SpectralOpsUtils.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>

#include "aten/pointwise.h"
#include "aten/registry.h"

namespace torchtpu::aten {

namespace {

// The kernels whose lowering is right for complex operands (names without
// "aten::" and overload). Elementwise arithmetic and transcendental
// functions are StableHLO's complex ops; data movement never looks at values.
const std::set<std::string>& complex_kernels() {
  static const auto* s = new std::set<std::string>{
      // data movement, views and copies
      "_copy_from", "_copy_from_and_resize", "_to_copy", "copy_", "clone", "fill_", "zero_", "_local_scalar_dense",
      "cat", "stack", "index", "index_select", "gather", "scatter", "index_put_", "_index_put_impl_", "where",
      "masked_fill_", "masked_select", "flip", "roll", "constant_pad_nd", "repeat", "tril", "triu", "diag_embed",
      "as_strided", "empty", "_unsafe_view", "narrow_copy", "slice_scatter", "select_scatter", "diagonal_scatter",
      "as_strided_scatter", "view_as_real", "view_as_complex", "complex", "polar", "conj_physical", "resolve_conj",
      "_fft_c2c", "_fft_r2c", "_fft_c2r",
      // arithmetic and functions
      "add", "sub", "rsub", "mul", "div", "neg", "reciprocal", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
      "abs", "sgn", "angle", "isnan", "eq", "ne", "sum", "mean", "prod", "mm", "bmm", "addmm", "dot", "mv", "pow",
      "addcmul", "addcdiv",
      // linear algebra on LU (complex pivots by |re| + |im|, as LAPACK)
      "linalg_lu_factor_ex", "linalg_lu", "linalg_lu_solve", "lu_unpack", "linalg_solve_triangular",
      "triangular_solve",
  };
  return *s;
}

std::string base_name(const char* op) {
  std::string s(op);
  if (s.rfind("aten::", 0) == 0) s = s.substr(6);
  const size_t dot = s.find('.');
  return dot == std::string::npos ? s : s.substr(0, dot);
}

using ops::Cmp;

ir::DType real_ir(at::ScalarType t) { return to_ir(c10::toRealValueType(t)); }

// stablehlo.fft of `x` over its last len(lengths) dims (at most three).
Value fft_last(Builder& b, Value x, const char* type, const ir::Dims& lengths, ir::DType result) {
  ir::Dims out = b.dims(x);
  if (std::string(type) == "RFFT") out.back() = lengths.back() / 2 + 1;
  if (std::string(type) == "IRFFT") out.back() = lengths.back();
  return b.graph().add("stablehlo.fft", {x}, ir::Type{result, out},
                       {ir::Attr::text("fft_type", std::string("#stablehlo<fft_type ") + type + ">"),
                        ir::Attr::array("fft_length", std::vector<int64_t>(lengths.begin(), lengths.end()))});
}

// Moves `dims` (in order) to the end; `inverse` moves them back.
struct Perm {
  std::vector<int64_t> to_end, inverse;
  Perm(int64_t rank, const std::vector<int64_t>& dims) {
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) to_end.push_back(d);
    to_end.insert(to_end.end(), dims.begin(), dims.end());
    inverse.resize(rank);
    for (int64_t i = 0; i < rank; ++i) inverse[to_end[i]] = i;
  }
};

// Scales by PyTorch's normalization of a transform of `n` points; XLA's
// inverse transforms divide by n themselves (`xla_divided`).
Value normalize(Builder& b, Value x, int64_t norm, double n, bool xla_divided) {
  double s = xla_divided ? n : 1.0;
  if (norm == static_cast<int64_t>(at::native::fft_norm_mode::by_root_n)) s /= std::sqrt(n);
  if (norm == static_cast<int64_t>(at::native::fft_norm_mode::by_n)) s /= n;
  return s == 1.0 ? x : b.mul(x, b.full_like(x, s));
}

// Unnormalized complex transforms over `dims` (any number, three at a time).
Value c2c(Builder& b, Value x, const std::vector<int64_t>& dims, bool forward, double* points) {
  const int64_t rank = static_cast<int64_t>(b.dims(x).size());
  for (size_t i = 0; i < dims.size(); i += 3) {
    std::vector<int64_t> part(dims.begin() + i, dims.begin() + std::min(dims.size(), i + 3));
    Perm p(rank, part);
    Value t = b.transpose(x, p.to_end);
    ir::Dims len;
    for (int64_t d : part) len.push_back(b.dims(x)[d]);
    for (int64_t l : len) *points *= static_cast<double>(l);
    t = fft_last(b, t, forward ? "FFT" : "IFFT", len, b.dtype(x));
    x = b.transpose(t, p.inverse);
  }
  return x;
}

std::vector<int64_t> wrapped(at::IntArrayRef dim, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dim) out.push_back(c10::maybe_wrap_dim(d, rank));
  return out;
}

at::Tensor fft_c2c(const at::Tensor& self, at::IntArrayRef dim, int64_t norm, bool forward, at::Tensor* out) {
  TORCH_CHECK(self.is_complex(), "_fft_c2c: expected a complex input, got ", self.scalar_type());
  Kernel k("aten::_fft_c2c", self);
  Builder& b = k.b();
  double n = 1;
  Value x = c2c(b, k.in(self), wrapped(dim, self.dim()), forward, &n);
  Value r = normalize(b, x, norm, n, /*xla_divided=*/!forward && !dim.empty());
  at::Tensor t = k.result(r, self.scalar_type(), out);
  k.run();
  return t;
}

at::Tensor fft_r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t norm, bool onesided, at::Tensor* out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "_fft_r2c: expected a real input, got ", self.scalar_type());
  const at::ScalarType ct = c10::toComplexType(self.scalar_type());
  Kernel k("aten::_fft_r2c", self);
  Builder& b = k.b();
  const std::vector<int64_t> dims = wrapped(dim, self.dim());
  Value x = k.in(self, c10::toRealValueType(ct));
  double n = 1;
  if (!onesided || dims.empty()) {
    x = c2c(b, b.convert(x, to_ir(ct)), dims, /*forward=*/true, &n);
  } else {
    // The last dim's one-sided real transform, then the others' complex ones.
    const int64_t last = dims.back();
    Perm p(self.dim(), {last});
    const int64_t len = self.size(last);
    n *= static_cast<double>(len);
    x = b.transpose(fft_last(b, b.transpose(x, p.to_end), "RFFT", {len}, to_ir(ct)), p.inverse);
    x = c2c(b, x, std::vector<int64_t>(dims.begin(), dims.end() - 1), /*forward=*/true, &n);
  }
  at::Tensor t = k.result(normalize(b, x, norm, n, false), ct, out);
  k.run();
  return t;
}

at::Tensor fft_c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t norm, int64_t last_dim_size, at::Tensor* out) {
  TORCH_CHECK(self.is_complex(), "_fft_c2r: expected a complex input, got ", self.scalar_type());
  TORCH_CHECK(!dim.empty() && last_dim_size >= 1, "_fft_c2r: invalid signal size ", last_dim_size);
  Kernel k("aten::_fft_c2r", self);
  Builder& b = k.b();
  const std::vector<int64_t> dims = wrapped(dim, self.dim());
  const int64_t last = dims.back();
  const int64_t half = last_dim_size / 2 + 1;
  TORCH_CHECK(self.size(last) >= half, "_fft_c2r: the last signal dim has ", self.size(last),
              " points, fewer than the ", half, " that ", last_dim_size, " output points need");
  double n = 1;
  Value x = c2c(b, k.in(self), std::vector<int64_t>(dims.begin(), dims.end() - 1), /*forward=*/false, &n);
  Value t = b.slice_dim(x, last, 0, half);
  Perm p(self.dim(), {last});
  n *= static_cast<double>(last_dim_size);
  const ir::DType rt = real_ir(self.scalar_type());
  Value r = b.transpose(fft_last(b, b.transpose(t, p.to_end), "IRFFT", {last_dim_size}, rt), p.inverse);
  // The inner inverse transforms were divided by XLA as well (one factor n in all).
  at::Tensor res = k.result(normalize(b, r, norm, n, true), c10::toRealValueType(self.scalar_type()), out);
  k.run();
  return res;
}

at::Tensor& complex_out(const at::Tensor& re, const at::Tensor& im, at::Tensor& out) {
  TORCH_CHECK(re.scalar_type() == im.scalar_type(), "Expected object of scalar type ", re.scalar_type(),
              " but got scalar type ", im.scalar_type(), " for second argument");
  TORCH_CHECK(re.scalar_type() == at::kFloat || re.scalar_type() == at::kDouble,
              "Expected both inputs to be Float or Double tensors but got ", re.scalar_type(), " and ",
              im.scalar_type(), " (complex32 is not a tpu dtype)");
  Kernel k("aten::complex.out", device_of(re, im));
  k.elementwise({&re, &im});
  finish(k, k.b().complex(k.in(re), k.in(im)), c10::toComplexType(re.scalar_type()), Dest::kOut, &out);
  return out;
}

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "Expected object of scalar type ", abs.scalar_type(),
              " but got scalar type ", angle.scalar_type(), " for second argument");
  TORCH_CHECK(abs.scalar_type() == at::kFloat || abs.scalar_type() == at::kDouble,
              "Expected both inputs to be Float or Double tensors but got ", abs.scalar_type(), " and ",
              angle.scalar_type());
  Kernel k("aten::polar.out", device_of(abs, angle));
  k.elementwise({&abs, &angle});
  Builder& b = k.b();
  Value r = k.in(abs), a = k.in(angle);
  finish(k, b.complex(b.mul(r, b.cos(a)), b.mul(r, b.sin(a))), c10::toComplexType(abs.scalar_type()), Dest::kOut,
         &out);
  return out;
}

at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }
at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

at::Tensor& fft_c2c_out(const at::Tensor& s, at::IntArrayRef d, int64_t n, bool f, at::Tensor& o) {
  fft_c2c(s, d, n, f, &o);
  return o;
}
at::Tensor& fft_r2c_out(const at::Tensor& s, at::IntArrayRef d, int64_t n, bool one, at::Tensor& o) {
  fft_r2c(s, d, n, one, &o);
  return o;
}
at::Tensor& fft_c2r_out(const at::Tensor& s, at::IntArrayRef d, int64_t n, int64_t last, at::Tensor& o) {
  fft_c2r(s, d, n, last, &o);
  return o;
}

}  // namespace

bool complex_supported(const char* op) { return complex_kernels().count(base_name(op)) > 0; }

Value complex_sgn(Builder& b, Value z) {
  Value mag = b.abs(z);
  Value unit = b.div(z, b.complex(mag, b.zeros_like(mag)));
  return b.select(b.compare(mag, b.zeros_like(mag), Cmp::kEQ), b.zeros_like(z), unit);
}

TPU_KERNELS(m) {
  // The functional forms are derived from the out= kernels (registry.h).
  m.out("_fft_c2c.out", TORCH_FN(fft_c2c_out), "_fft_c2c");
  m.out("_fft_c2r.out", TORCH_FN(fft_c2r_out), "_fft_c2r");
  m.out("_fft_r2c.out", TORCH_FN(fft_r2c_out), "_fft_r2c");
  m.impl("complex.out", TORCH_FN(complex_out));
  m.impl("polar.out", TORCH_FN(polar_out));
  m.impl("view_as_complex", TORCH_FN(view_as_complex));
  m.impl("view_as_real", TORCH_FN(view_as_real));
}

}  // namespace torchtpu::aten

// A copy between devices sees the conjugate and negative bits itself (as
// CPU and CUDA copies do): PyTorch's fallback for those bits would clone
// the source through this same copy, without end.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

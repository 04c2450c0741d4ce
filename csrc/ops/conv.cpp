#include "ops/conv.h"

#include <utility>

namespace torchtpu::ops {

using ir::Attr;

namespace {

// Where batch and feature dims sit in each operand of stablehlo.convolution;
// spatial dims always follow at 2.. in order.
struct Layout {
  bool lhs_fb = false;  // lhs [f, b, *S] instead of [b, f, *S]
  bool rhs_io = false;  // rhs [i, o, *K] instead of [o, i, *K]
  bool out_fb = false;  // result [f, b, *S] instead of [b, f, *S]
};

struct Window {
  Dims strides, lhs_dilation, rhs_dilation;
  std::vector<std::pair<int64_t, int64_t>> padding;
  int64_t feature_groups = 1, batch_groups = 1;
};

std::string layout_str(const char* d0, const char* d1, size_t nsp) {
  std::string s = std::string("[") + d0 + ", " + d1;
  for (size_t i = 0; i < nsp; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

std::string padding_attr(const std::vector<std::pair<int64_t, int64_t>>& pad) {
  std::string s = "dense<[";
  for (size_t i = 0; i < pad.size(); ++i)
    s += (i ? ", [" : "[") + std::to_string(pad[i].first) + ", " + std::to_string(pad[i].second) + "]";
  return s + "]> : tensor<" + std::to_string(pad.size()) + "x2xi64>";
}

Dims ones(size_t n) { return Dims(n, 1); }

// stablehlo.convolution with its result type computed from the spec's
// formula. Negative padding becomes an explicit pad of lhs (which crops).
Value convolution(Builder& b, Value lhs, Value rhs, const Layout& l, Window w) {
  const Dims ld = b.dims(lhs), rd = b.dims(rhs);
  if (ld.size() < 3 || rd.size() != ld.size())
    throw LoweringError("convolution: expected operands of equal rank >= 3, got " + shape_str(ld) + " and " +
                        shape_str(rd));
  const size_t nsp = ld.size() - 2;
  bool negative = false;
  for (auto [lo, hi] : w.padding) negative |= lo < 0 || hi < 0;
  if (negative) {
    Dims low(2, 0), high(2, 0), interior(2, 0);
    for (size_t i = 0; i < nsp; ++i) {
      low.push_back(w.padding[i].first);
      high.push_back(w.padding[i].second);
      interior.push_back(w.lhs_dilation[i] - 1);
    }
    lhs = b.pad(lhs, b.constant(b.dtype(lhs), 0), low, high, interior);
    w.padding.assign(nsp, {0, 0});
    w.lhs_dilation = ones(nsp);
    return convolution(b, lhs, rhs, l, w);
  }
  const int64_t lhs_batch = ld[l.lhs_fb ? 1 : 0], lhs_feat = ld[l.lhs_fb ? 0 : 1];
  const int64_t rhs_in = rd[l.rhs_io ? 0 : 1], rhs_out = rd[l.rhs_io ? 1 : 0];
  if (lhs_feat != rhs_in * w.feature_groups || lhs_batch % w.batch_groups || rhs_out % w.batch_groups ||
      rhs_out % w.feature_groups)
    throw LoweringError("convolution: operand shapes " + shape_str(ld) + " and " + shape_str(rd) +
                        " do not match the feature/batch groups");
  Dims out(2);
  out[l.out_fb ? 1 : 0] = lhs_batch / w.batch_groups;
  out[l.out_fb ? 0 : 1] = rhs_out;
  for (size_t i = 0; i < nsp; ++i) {
    int64_t s = ld[2 + i], k = rd[2 + i];
    int64_t padded = (s == 0 ? 0 : (s - 1) * w.lhs_dilation[i] + 1) + w.padding[i].first + w.padding[i].second;
    int64_t window = k == 0 ? 0 : (k - 1) * w.rhs_dilation[i] + 1;
    out.push_back(padded < window ? 0 : (padded - window) / w.strides[i] + 1);
  }
  std::string dn = "#stablehlo.conv<" + layout_str(l.lhs_fb ? "f" : "b", l.lhs_fb ? "b" : "f", nsp) + "x" +
                   layout_str(l.rhs_io ? "i" : "o", l.rhs_io ? "o" : "i", nsp) + "->" +
                   layout_str(l.out_fb ? "f" : "b", l.out_fb ? "b" : "f", nsp) + ">";
  std::vector<Attr> attrs{Attr::array("window_strides", w.strides), Attr::text("padding", padding_attr(w.padding)),
                          Attr::array("lhs_dilation", w.lhs_dilation), Attr::array("rhs_dilation", w.rhs_dilation),
                          Attr::text("dimension_numbers", dn), Attr::i64("feature_group_count", w.feature_groups),
                          Attr::i64("batch_group_count", w.batch_groups)};
  b.add_precision(b.dtype(lhs), attrs);
  return b.graph().add("stablehlo.convolution", {lhs, rhs}, Type{b.dtype(lhs), out}, std::move(attrs));
}

Dims spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }

// The three convolutions of a plain (non-transposed) PyTorch convolution.
// x [N, C, *S], w [O, C/g, *K], g (output gradient) [N, O, *OS].
Value plain_forward(Builder& b, Value x, Value w, const ConvParams& p) {
  const size_t nsp = p.stride.size();
  Window win{p.stride, ones(nsp), p.dilation, {}, p.groups, 1};
  for (int64_t pad : p.padding) win.padding.push_back({pad, pad});
  return convolution(b, x, w, Layout{}, win);
}

Value plain_grad_input(Builder& b, Value g, Value w, const Dims& s, const ConvParams& p) {
  const Dims wd = b.dims(w), os = spatial(b.dims(g));
  const size_t nsp = s.size();
  std::vector<int64_t> sp;
  for (size_t i = 0; i < nsp; ++i) sp.push_back(static_cast<int64_t>(2 + i));
  Value rw = b.graph().add("stablehlo.reverse", {w}, b.type(w), {Attr::array("dimensions", sp)});
  if (p.groups > 1) {
    // [O, C/g, *K] -> [O/g, C, *K]: group j's output features become input
    // features, its C/g input features the j-th block of output features.
    const int64_t g = p.groups;
    Dims split{g, wd[0] / g, wd[1]};
    for (size_t i = 0; i < nsp; ++i) split.push_back(wd[2 + i]);
    std::vector<int64_t> perm{1, 0};
    for (size_t i = 2; i < split.size(); ++i) perm.push_back(static_cast<int64_t>(i));
    rw = b.transpose(b.reshape(rw, split), perm);
    Dims merged{wd[0] / g, g * wd[1]};
    for (size_t i = 0; i < nsp; ++i) merged.push_back(wd[2 + i]);
    rw = b.reshape(rw, merged);
  }
  Window win{ones(nsp), p.stride, p.dilation, {}, p.groups, 1};
  for (size_t i = 0; i < nsp; ++i) {
    int64_t lo = (wd[2 + i] - 1) * p.dilation[i] - p.padding[i];
    int64_t hi = s[i] + p.padding[i] - 1 - (os[i] - 1) * p.stride[i];
    win.padding.push_back({lo, hi});
  }
  return convolution(b, g, rw, Layout{false, true, false}, win);
}

Value plain_grad_weight(Builder& b, Value x, Value g, const Dims& k, const ConvParams& p) {
  const Dims s = spatial(b.dims(x)), os = spatial(b.dims(g));
  const size_t nsp = s.size();
  Window win{p.dilation, ones(nsp), p.stride, {}, 1, p.groups};
  for (size_t i = 0; i < nsp; ++i) {
    int64_t hi = (k[i] - 1) * p.dilation[i] + (os[i] - 1) * p.stride[i] + 1 - s[i] - p.padding[i];
    win.padding.push_back({p.padding[i], hi});
  }
  return convolution(b, x, g, Layout{true, true, true}, win);
}

void check_result(const char* what, Builder& b, Value v, const Dims& want) {
  if (b.dims(v) != want)
    throw LoweringError(std::string(what) + ": computed shape " + shape_str(b.dims(v)) + ", expected " +
                        shape_str(want));
}

}  // namespace

Dims conv_output_spatial(const Dims& input, const Dims& weight, const ConvParams& p) {
  Dims out;
  for (size_t i = 0; i < p.stride.size(); ++i) {
    int64_t s = input[2 + i], k = weight[2 + i];
    if (p.transposed)
      out.push_back((s - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (k - 1) + p.output_padding[i] + 1);
    else
      out.push_back((s + 2 * p.padding[i] - p.dilation[i] * (k - 1) - 1) / p.stride[i] + 1);
  }
  return out;
}

Value conv_forward(Builder& b, Value input, Value weight, const ConvParams& p) {
  if (!p.transposed) return plain_forward(b, input, weight, p);
  // A transposed convolution is the input gradient of the plain one whose
  // weight it shares ([C_in, C_out/g, *K] read as [O, I/g, *K]).
  Dims out = conv_output_spatial(b.dims(input), b.dims(weight), p);
  return plain_grad_input(b, input, weight, out, p);
}

Value conv_backward_input(Builder& b, Value grad_out, Value weight, const Dims& input_dims, const ConvParams& p) {
  Value r = p.transposed ? plain_forward(b, grad_out, weight, p)
                         : plain_grad_input(b, grad_out, weight, spatial(input_dims), p);
  if (p.transposed) {
    // An output padding of at least the stride (allowed below the dilation)
    // leaves windows past the last input position: they are not inputs.
    Dims rd = b.dims(r);
    bool longer = rd.size() == input_dims.size();
    for (size_t i = 2; longer && i < rd.size(); ++i) longer = rd[i] >= input_dims[i];
    if (longer && rd != input_dims) r = b.slice(r, Dims(rd.size(), 0), input_dims);
  }
  check_result("convolution_backward (input)", b, r, input_dims);
  return r;
}

Value conv_backward_weight(Builder& b, Value grad_out, Value input, const Dims& weight_dims, const ConvParams& p) {
  Dims k = spatial(weight_dims);
  Value r = p.transposed ? plain_grad_weight(b, grad_out, input, k, p) : plain_grad_weight(b, input, grad_out, k, p);
  check_result("convolution_backward (weight)", b, r, weight_dims);
  return r;
}

}  // namespace torchtpu::ops

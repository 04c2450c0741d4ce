// PyTorch's transformer inference fast path: nn.TransformerEncoderLayer and
// nn.MultiheadAttention in eval mode without grad call these fused ops. Each
// computes what the CPU kernel computes (aten/native/transformers), written
// with the device's own ops, so Fused Eager merges them into one program:
// - _masked_softmax: softmax over the unmasked elements (mask true = left
//   out), 0 where masked, NaN over a fully masked row; mask types 0 (L, L),
//   1 (B, L) key padding, 2 the input's shape;
// - _transform_bias_rescale_qkv: [B, T, 3D] into q, k, v of [B, H, T, D/H]
//   with the bias added and q scaled by 1/sqrt(D/H);
// - _native_multi_head_attention and _transformer_encoder_layer_fwd.
// nn.TransformerEncoder with a key padding mask packs its batch into a nested
// tensor (_nested_tensor_from_mask; one sync for the lengths): its buffer is
// a device tensor, and the layer runs on the padded batch with the padding
// masked out of the keys (the rows of each sequence come out as the CPU's
// nested kernel computes them); to_padded_tensor unpacks it. Those nested
// kernels register themselves (NestedTensorPrivateUse1, outside the table).
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "aten/registry.h"

namespace torchtpu::aten {
namespace {

at::Tensor masked_softmax(const at::Tensor& input, const at::Tensor& mask_in, std::optional<int64_t> dim_in,
                          std::optional<int64_t> mask_type) {
  TORCH_CHECK(mask_in.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  at::Tensor mask = mask_in;
  if (mask.dim() != 2 || input.dim() != 4) mask_type = 2;  // types 0 and 1 are 2-D masks of 4-D inputs
  if (mask_type == 1) {
    TORCH_CHECK(input.size(0) == mask.size(0) && input.size(2) == mask.size(1),
                "For mask_type == 1 mask shape should be (B, L)");
    mask = mask.view({input.size(0), 1, 1, input.size(2)});
  } else if (mask_type == 0) {
    TORCH_CHECK(input.size(2) == mask.size(0) && input.size(2) == mask.size(1),
                "For mask_type == 0 mask shape should be (L, L)");
    mask = mask.view({1, 1, input.size(2), input.size(2)});
  } else {
    TORCH_CHECK(input.sizes() == mask.sizes(), mask_type == 2
                                                   ? "For mask_type == 2 mask shape should match input shape"
                                                   : "Mask shape should match input shape");
  }
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "\"masked_softmax\" not implemented for '",
              c10::toString(input.scalar_type()), "'");
  if (input.dim() == 0) return masked_softmax(input.view(1), mask.view(1), 0, 2).view({});
  const int64_t dim = c10::maybe_wrap_dim(dim_in.value_or(input.dim() - 1), input.dim());
  return at::softmax(input.masked_fill(mask, -std::numeric_limits<double>::infinity()), dim);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> transform_bias_rescale_qkv(const at::Tensor& qkv,
                                                                         const at::Tensor& qkv_bias, int64_t heads) {
  TORCH_CHECK(!qkv.is_nested(), "_transform_bias_rescale_qkv: nested tensors are not supported on tpu");
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / 3;
  TORCH_CHECK(D % heads == 0);
  TORCH_CHECK(qkv.size(2) % 3 == 0);
  const int64_t per_head = D / heads;
  // [B, T, 3, H, dh] -> [3, B, H, T, dh]
  at::Tensor parts = (qkv + qkv_bias).view({B, T, 3, heads, per_head}).permute({2, 0, 3, 1, 4});
  // The CPU multiplies by 1 / sqrt(dh), the root taken in the tensor's
  // dtype (float for 16-bit ones); the product rounds the factor to it.
  const double inv = qkv.scalar_type() == at::kDouble ? 1.0 / std::sqrt(static_cast<double>(per_head))
                                                      : 1.0 / std::sqrt(static_cast<float>(per_head));
  at::Tensor q = parts[0] * inv;
  return {q.contiguous(), parts[1].contiguous(), parts[2].contiguous()};
}

// [B, T, 3D]: query, key and value through their thirds of qkv_weight.
at::Tensor qkv_projection(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t D,
                          const at::Tensor& qkv_weight) {
  if (key.is_same(value) && query.is_same(key)) return at::matmul(query, qkv_weight.t());
  std::vector<at::Tensor> w = qkv_weight.split(D, 0);
  return at::cat({at::matmul(query, w[0].t()), at::matmul(key, w[1].t()), at::matmul(value, w[2].t())}, 2);
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t heads,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_weights,
    std::optional<int64_t> mask_type) {
  const int64_t D = embed_dim;
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.sizes()[2] == embed_dim, "passed-in embed_dim ", embed_dim, " didn't match last dim of query ",
              query.sizes()[2]);
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(), "-D tensor");
  TORCH_CHECK(D * 3 == qkv_weight.sizes()[0], "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(D == qkv_weight.sizes()[1], "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.sizes()[0] == 3 * D, "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(D % heads == 0, "`embed_dim` must divide evenly by `num_heads`");
  at::Tensor qkv = qkv_projection(query, key, value, D, qkv_weight);
  if (qkv.numel() == 0) return {at::empty_like(query), at::Tensor()};
  auto [q, k, v] = transform_bias_rescale_qkv(qkv, qkv_bias, heads);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));  // [B, H, T, T]
  if (mask) {
    scores = masked_softmax(scores, mask->scalar_type() == at::kBool ? *mask : mask->to(at::kBool), 3, mask_type);
  } else {
    scores = at::softmax(scores, -1);
  }
  at::Tensor ctx = at::matmul(scores, v);  // [B, H, T, dh]
  const int64_t B = query.size(0), T = query.size(1);
  at::Tensor proj = at::linear(ctx.permute({0, 2, 1, 3}).reshape({B, T, D}), proj_weight, proj_bias);
  if (!need_weights) return {proj, at::Tensor()};
  if (average_weights) scores = scores.sum(1) / heads;
  return {proj, scores};
}

at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t heads, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu, bool norm_first, double eps,
    const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
    std::optional<int64_t> mask_type) {
  TORCH_CHECK(!src.is_nested(), "_transformer_encoder_layer_fwd: nested tensors are not supported on tpu");
  if (src.numel() == 0) return src.clone();
  auto norm = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return at::layer_norm(x, {embed_dim}, w, b, eps, true);
  };
  at::Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(native_multi_head_attention(x, x, x, embed_dim, heads, qkv_weight, qkv_bias, proj_weight,
                                              proj_bias, mask, false, true, mask_type));
  x = x + src;
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  at::Tensor residual = x;
  if (norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  TORCH_CHECK(x.dim() == 3, "batched input size should be 3");
  TORCH_CHECK(ffn_weight_1.dim() == 2 && ffn_weight_2.dim() == 2, "2d weights expected");
  x = at::linear(x, ffn_weight_1, ffn_bias_1);
  x = use_gelu ? at::gelu(x) : at::relu(x);
  x = at::linear(x, ffn_weight_2, ffn_bias_2) + residual;
  if (!norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  return x;
}

// Whether every row of the [B, T] mask is trues then falses.
bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of type bool");
  TORCH_CHECK(mask.dim() == 2 && t.dim() >= 2 && mask.size(0) == t.size(0) && mask.size(1) == t.size(1),
              "Mask size ", mask.sizes(), " does not match tensor size ", t.sizes());
  if (mask.size(1) < 2) return true;
  using at::indexing::Slice;
  return at::ge(mask.index({Slice(), Slice(0, -1)}), mask.index({Slice(), Slice(1)})).all().item<bool>();
}

// [B, T, D] and its [B, T] mask (true = kept, left-aligned) as a nested
// tensor of B [len_i, D] sequences whose buffer stays on the device.
at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  TORCH_CHECK(t.dim() == 3, "Expected a 3-D tensor, got ", t.dim(), "-D");
  if (mask_check)
    TORCH_CHECK(nested_tensor_from_mask_left_aligned(t, mask), "Mask must be left-aligned.");
  const at::Tensor lengths = mask.sum(1).cpu();  // the one sync: sizes are host values
  const int64_t B = t.size(0), D = t.size(2);
  at::Tensor sizes = at::empty({B, 2}, at::kLong);
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t n = lengths[i].item<int64_t>();
    sizes[i][0] = n;
    sizes[i][1] = D;
    rows.push_back(t[i].narrow(0, 0, n).reshape({-1}));
  }
  at::Tensor buffer = B ? at::cat(rows) : at::empty({0}, t.options());
  return at::detail::make_tensor<at::native::NestedTensorImpl>(buffer, sizes);
}

// The sequences of a nested device tensor padded to [B, T, ...] (T the
// longest, or `size`'s).
at::Tensor padded(const at::Tensor& nested, double padding, at::OptionalIntArrayRef size) {
  auto* impl = at::native::get_nested_tensor_impl(nested);
  const at::Tensor buffer = impl->get_buffer();
  const at::Tensor sizes = impl->get_nested_sizes();
  TORCH_CHECK(sizes.dim() == 2 && sizes.size(1) == 2, "to_padded_tensor: tpu takes nested tensors of 2-D sequences");
  const int64_t B = sizes.size(0);
  std::vector<int64_t> len(B), width(B);
  int64_t longest = 0, D = B ? sizes[0][1].item<int64_t>() : 0;
  for (int64_t i = 0; i < B; ++i) {
    len[i] = sizes[i][0].item<int64_t>();
    width[i] = sizes[i][1].item<int64_t>();
    TORCH_CHECK(width[i] == D, "to_padded_tensor: tpu takes sequences of one width");
    longest = std::max(longest, len[i]);
  }
  int64_t T = longest;
  if (size && !size->empty()) {
    TORCH_CHECK(size->size() == 3 && (*size)[0] == B && (*size)[1] >= longest && (*size)[2] == D,
                "to_padded_tensor: output_size ", *size, " does not fit the nested tensor");
    T = (*size)[1];
  }
  std::vector<at::Tensor> rows;
  int64_t offset = 0;
  for (int64_t i = 0; i < B; ++i) {
    at::Tensor row = buffer.narrow(0, offset, len[i] * D).view({len[i], D});
    offset += len[i] * D;
    rows.push_back(at::constant_pad_nd(row, {0, 0, 0, T - len[i]}, padding));
  }
  return B ? at::stack(rows) : at::empty({0, T, D}, buffer.options());
}

at::Tensor to_padded_tensor(const at::Tensor& self, double padding, at::OptionalIntArrayRef output_size) {
  return padded(self, padding, output_size);
}

// The layer on a nested batch: the padded batch with its padding masked out
// of the keys, repacked into the same sequences.
at::Tensor nested_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t heads, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu, bool norm_first, double eps,
    const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
    std::optional<int64_t> mask_type) {
  TORCH_CHECK(!mask, "_transformer_encoder_layer_fwd: a nested input takes no mask (its padding is the mask)");
  const at::Tensor sizes = at::native::get_nested_sizes(src);
  at::Tensor x = padded(src, 0.0, std::nullopt);
  const int64_t T = x.size(1);
  at::Tensor keep = at::arange(T, x.options().dtype(at::kLong)).unsqueeze(0) <
                    sizes.select(1, 0).to(x.device()).unsqueeze(1);  // [B, T], true inside each sequence
  at::Tensor y = at::_transformer_encoder_layer_fwd(x, embed_dim, heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                                   use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
                                                   norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2,
                                                   ffn_bias_2, keep.logical_not(), 1);
  return at::_nested_tensor_from_mask(y, keep, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(nested_encoder_layer_fwd));
  m.impl("to_padded_tensor", TORCH_FN(to_padded_tensor));
}

TPU_KERNELS(m) {
  m.impl("_masked_softmax", TORCH_FN(masked_softmax));
  m.impl("_native_multi_head_attention", TORCH_FN(native_multi_head_attention));
  m.impl("_nested_tensor_from_mask", TORCH_FN(nested_tensor_from_mask));
  m.impl("_nested_tensor_from_mask_left_aligned", TORCH_FN(nested_tensor_from_mask_left_aligned));
  m.impl("_transform_bias_rescale_qkv", TORCH_FN(transform_bias_rescale_qkv));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(transformer_encoder_layer_fwd));
}

}  // namespace torchtpu::aten

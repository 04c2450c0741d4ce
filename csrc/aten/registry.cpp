// The one registration table: every aten overload with a tpu kernel, sorted
// by op name, with the family that binds it (csrc/aten/kernels_<family>.cpp,
// whose lowerings live in csrc/ops/). register_kernels() registers the
// families' kernels in this order and stops the import when a kernel is
// bound but not listed, listed but not bound, bound twice, or bound by
// another family than the table says. (The AutogradPrivateUse1 kernels of
// kernels_reduce.cpp and the NestedTensorPrivateUse1 ones of
// kernels_transformer.cpp register themselves.)
#include "aten/registry.h"

#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace torchtpu::aten {
namespace {

struct Row {
  const char* family;
  const char* overloads;  // space-separated
};

// clang-format off
constexpr Row kTable[] = {
    {"pool",         "_adaptive_avg_pool2d"},
    {"pool",         "_adaptive_avg_pool2d_backward"},
    {"pool",         "_adaptive_avg_pool3d"},
    {"pool",         "_adaptive_avg_pool3d_backward"},
    {"optim",        "_amp_foreach_non_finite_check_and_unscale_"},
    {"optim",        "_amp_update_scale_"},
    {"core",         "_assert_async _assert_async.msg"},
    {"norm",         "_batch_norm_no_update"},
    {"norm",         "_batch_norm_with_update"},
    {"matrix",       "_cdist_backward"},
    {"matrix",       "_cdist_forward"},
    {"linalg",       "_cholesky_solve_helper"},
    {"core",         "_copy_from"},
    {"core",         "_copy_from_and_resize"},
    {"ctc",          "_ctc_loss _ctc_loss.Tensor"},
    {"ctc",          "_ctc_loss_backward _ctc_loss_backward.Tensor"},
    {"sort",         "_cummax_helper"},
    {"sort",         "_cummin_helper"},
    {"core",         "_efficientzerotensor"},
    {"embedding",    "_embedding_bag"},
    {"embedding",    "_embedding_bag_backward"},
    {"embedding",    "_embedding_bag_forward_only"},
    {"embedding",    "_embedding_bag_per_sample_weights_backward"},
    {"complex",      "_fft_c2c _fft_c2c.out"},
    {"complex",      "_fft_c2r _fft_c2r.out"},
    {"complex",      "_fft_r2c _fft_r2c.out"},
    {"foreach",      "_foreach_*"},  // every functional and in-place overload the family binds
    {"optim",        "_fused_adam_ _fused_adam_.tensor_lr"},
    {"optim",        "_fused_adamw_ _fused_adamw_.tensor_lr"},
    {"optim",        "_fused_sgd_ _fused_sgd_.tensor_lr"},
    {"core",         "_has_compatible_shallow_copy_type"},
    {"histogram",    "_histogramdd_bin_edges"},
    {"histogram",    "_histogramdd_from_bin_cts"},
    {"histogram",    "_histogramdd_from_bin_tensors"},
    {"index",        "_index_put_impl_"},
    {"linalg_solve", "_linalg_det _linalg_det.result"},
    {"decompose",    "_linalg_eigh _linalg_eigh.eigenvalues"},
    {"linalg_solve", "_linalg_slogdet _linalg_slogdet.sign"},
    {"linalg_solve", "_linalg_solve_ex _linalg_solve_ex.result"},
    {"decompose",    "_linalg_svd _linalg_svd.U"},
    {"core",         "_local_scalar_dense"},
    {"softmax",      "_log_softmax _log_softmax.out"},
    {"softmax",      "_log_softmax_backward_data"},
    {"sort",         "_logcumsumexp _logcumsumexp.out"},
    {"transformer",  "_masked_softmax"},
    {"norm",         "_native_batch_norm_legit _native_batch_norm_legit.no_stats"},
    {"norm",         "_native_batch_norm_legit.no_stats_out _native_batch_norm_legit.out"},
    {"norm",         "_native_batch_norm_legit_no_training"},
    {"transformer",  "_native_multi_head_attention"},
    {"transformer",  "_nested_tensor_from_mask"},
    {"transformer",  "_nested_tensor_from_mask_left_aligned"},
    {"matrix",       "_pdist_backward"},
    {"matrix",       "_pdist_forward"},
    {"activation",   "_prelu_kernel"},
    {"activation",   "_prelu_kernel_backward"},
    {"core",         "_reshape_alias"},
    {"matrix",       "_scaled_mm"},
    {"segment",      "_segment_reduce_backward"},
    {"softmax",      "_softmax _softmax.out"},
    {"softmax",      "_softmax_backward_data"},
    {"rnn",          "_thnn_fused_gru_cell"},
    {"rnn",          "_thnn_fused_gru_cell_backward"},
    {"rnn",          "_thnn_fused_lstm_cell"},
    {"rnn",          "_thnn_fused_lstm_cell_backward_impl"},
    {"transformer",  "_transform_bias_rescale_qkv"},
    {"transformer",  "_transformer_encoder_layer_fwd"},
    {"compact",      "_unique"},
    {"compact",      "_unique2"},
    {"resample",     "_upsample_bicubic2d_aa _upsample_bicubic2d_aa.out"},
    {"resample",     "_upsample_bicubic2d_aa_backward _upsample_bicubic2d_aa_backward.grad_input"},
    {"resample",     "_upsample_bilinear2d_aa _upsample_bilinear2d_aa.out"},
    {"resample",     "_upsample_bilinear2d_aa_backward _upsample_bilinear2d_aa_backward.grad_input"},
    {"resample",     "_upsample_nearest_exact1d _upsample_nearest_exact1d.out"},
    {"resample",     "_upsample_nearest_exact1d_backward _upsample_nearest_exact1d_backward.grad_input"},
    {"resample",     "_upsample_nearest_exact2d _upsample_nearest_exact2d.out"},
    {"resample",     "_upsample_nearest_exact2d_backward _upsample_nearest_exact2d_backward.grad_input"},
    {"resample",     "_upsample_nearest_exact3d _upsample_nearest_exact3d.out"},
    {"resample",     "_upsample_nearest_exact3d_backward _upsample_nearest_exact3d_backward.grad_input"},
    {"pointwise",    "abs abs.out abs_"},
    {"math",         "acos acos.out acos_"},
    {"math",         "acosh acosh.out acosh_"},
    {"pool",         "adaptive_avg_pool2d.out"},
    {"pool",         "adaptive_avg_pool3d.out"},
    {"pool",         "adaptive_max_pool2d adaptive_max_pool2d.out"},
    {"pool",         "adaptive_max_pool2d_backward adaptive_max_pool2d_backward.grad_input"},
    {"pool",         "adaptive_max_pool3d adaptive_max_pool3d.out"},
    {"pool",         "adaptive_max_pool3d_backward adaptive_max_pool3d_backward.grad_input"},
    {"pointwise",    "add.Tensor add.out add_.Tensor"},
    {"matrix",       "addbmm addbmm.out addbmm_"},
    {"pointwise",    "addcdiv addcdiv.out addcdiv_"},
    {"pointwise",    "addcmul addcmul.out addcmul_"},
    {"nn",           "addmm addmm.out addmm_"},
    {"matrix",       "addmv addmv.out addmv_"},
    {"nn",           "addr_"},
    {"reduce",       "all all.all_out all.dim all.dims all.dims_out all.out"},
    {"reduce",       "amax amax.out"},
    {"reduce",       "amin amin.out"},
    {"reduce",       "aminmax aminmax.out"},
    {"math",         "angle angle.out"},
    {"reduce",       "any any.all_out any.dim any.dims any.dims_out any.out"},
    {"nn",           "arange.start_out"},
    {"reduce",       "argmax argmax.out"},
    {"reduce",       "argmin argmin.out"},
    {"core",         "as_strided"},
    {"math",         "asin asin.out asin_"},
    {"math",         "asinh asinh.out asinh_"},
    {"math",         "atan atan.out atan_"},
    {"pointwise",    "atan2 atan2.out atan2_"},
    {"math",         "atanh atanh.out atanh_"},
    {"pool",         "avg_pool2d avg_pool2d.out"},
    {"pool",         "avg_pool2d_backward avg_pool2d_backward.grad_input"},
    {"pool",         "avg_pool3d avg_pool3d.out"},
    {"pool",         "avg_pool3d_backward avg_pool3d_backward.grad_input"},
    {"matrix",       "baddbmm baddbmm.out baddbmm_"},
    {"norm",         "batch_norm_backward"},
    {"random",       "bernoulli bernoulli.out bernoulli_.Tensor bernoulli_.float"},
    {"loss",         "binary_cross_entropy binary_cross_entropy.out"},
    {"loss",         "binary_cross_entropy_backward binary_cross_entropy_backward.grad_input"},
    {"pointwise",    "bitwise_and.Tensor bitwise_and.Tensor_out bitwise_and_.Tensor"},
    {"pointwise",    "bitwise_not bitwise_not.out bitwise_not_"},
    {"pointwise",    "bitwise_or.Tensor bitwise_or.Tensor_out bitwise_or_.Tensor"},
    {"pointwise",    "bitwise_xor.Tensor bitwise_xor.Tensor_out bitwise_xor_.Tensor"},
    {"nn",           "bmm bmm.out"},
    {"sort",         "bucketize.Scalar bucketize.Scalar_out bucketize.Tensor bucketize.Tensor_out"},
    {"nn",           "cat cat.out"},
    {"random",       "cauchy_"},
    {"pointwise",    "ceil ceil.out ceil_"},
    {"patches",      "channel_shuffle channel_shuffle.out"},
    {"linalg",       "cholesky cholesky.out"},
    {"linalg",       "cholesky_inverse cholesky_inverse.out"},
    {"select",       "clamp clamp.Tensor clamp.Tensor_out clamp.out clamp_ clamp_.Tensor"},
    {"select",       "clamp_max clamp_max.Tensor_out clamp_max.out clamp_max_"},
    {"select",       "clamp_min clamp_min.Tensor_out clamp_min.out clamp_min_"},
    {"patches",      "col2im col2im.out"},
    {"complex",      "complex.out"},
    {"math",         "conj_physical.out"},
    {"conv",         "convolution_backward_overrideable"},
    {"conv",         "convolution_overrideable"},
    {"math",         "copysign.Tensor copysign.out copysign_.Tensor"},
    {"pointwise",    "cos cos.out cos_"},
    {"math",         "cosh cosh.out cosh_"},
    {"sums",         "count_nonzero.dim_IntList count_nonzero.dim_IntList_out"},
    {"scan",         "cumprod.out"},
    {"scan",         "cumsum.out"},
    {"math",         "digamma digamma.out digamma_"},
    {"pointwise",    "div.Tensor div.Tensor_mode div.out div.out_mode div_.Tensor div_.Tensor_mode"},
    {"nn",           "dot"},
    {"activation",   "elu elu.out elu_"},
    {"activation",   "elu_backward elu_backward.grad_input"},
    {"nll",          "embedding_dense_backward"},
    {"embedding",    "embedding_renorm_"},
    {"core",         "empty.memory_format"},
    {"core",         "empty_strided"},
    {"pointwise",    "eq.Scalar eq.Scalar_out eq.Tensor eq.Tensor_out eq_.Scalar eq_.Tensor"},
    {"reduce",       "equal"},
    {"pointwise",    "erf erf.out erf_"},
    {"math",         "erfc erfc.out erfc_"},
    {"math",         "erfinv erfinv.out erfinv_"},
    {"pointwise",    "exp exp.out exp_"},
    {"math",         "exp2 exp2.out exp2_"},
    {"pointwise",    "expm1 expm1.out expm1_"},
    {"random",       "exponential_"},
    {"matrix",       "eye.m_out eye.out"},
    {"core",         "fill_.Scalar fill_.Tensor"},
    {"scan",         "flip"},
    {"pointwise",    "floor floor.out floor_"},
    {"pointwise",    "floor_divide floor_divide.out floor_divide_.Tensor"},
    {"math",         "fmax fmax.out"},
    {"math",         "fmin fmin.out"},
    {"pointwise",    "fmod.Scalar fmod.Scalar_out fmod.Tensor fmod.Tensor_out fmod_.Scalar fmod_.Tensor"},
    {"math",         "frac frac.out frac_"},
    {"pool",         "fractional_max_pool2d.output"},
    {"pool",         "fractional_max_pool2d_backward.grad_input"},
    {"pool",         "fractional_max_pool3d.output"},
    {"pool",         "fractional_max_pool3d_backward fractional_max_pool3d_backward.grad_input"},
    {"math",         "frexp.Tensor_out"},
    {"scatter",      "gather gather.out"},
    {"pointwise",    "ge.Scalar ge.Scalar_out ge.Tensor ge.Tensor_out ge_.Scalar ge_.Tensor"},
    {"select",       "gelu gelu.out"},
    {"select",       "gelu_backward"},
    {"random",       "geometric_"},
    {"decompose",    "geqrf geqrf.a"},
    {"activation",   "glu glu.out"},
    {"activation",   "glu_backward glu_backward.grad_input"},
    {"resample",     "grid_sampler_2d"},
    {"resample",     "grid_sampler_2d_backward"},
    {"resample",     "grid_sampler_3d"},
    {"resample",     "grid_sampler_3d_backward"},
    {"pointwise",    "gt.Scalar gt.Scalar_out gt.Tensor gt.Tensor_out gt_.Scalar gt_.Tensor"},
    {"activation",   "hardshrink hardshrink.out"},
    {"activation",   "hardshrink_backward hardshrink_backward.grad_input"},
    {"activation",   "hardsigmoid hardsigmoid.out hardsigmoid_"},
    {"activation",   "hardsigmoid_backward hardsigmoid_backward.grad_input"},
    {"activation",   "hardswish hardswish.out hardswish_"},
    {"activation",   "hardswish_backward"},
    {"activation",   "hardtanh hardtanh.out hardtanh_"},
    {"activation",   "hardtanh_backward hardtanh_backward.grad_input"},
    {"reduce",       "hash_tensor hash_tensor.out"},
    {"math",         "heaviside.out"},
    {"histogram",    "histc histc.out"},
    {"histogram",    "histogram.bin_ct histogram.bin_ct_out histogram.bins_tensor histogram.bins_tensor_out"},
    {"loss",         "huber_loss huber_loss.out"},
    {"loss",         "huber_loss_backward huber_loss_backward.out"},
    {"math",         "hypot hypot.out hypot_"},
    {"math",         "i0 i0.out i0_"},
    {"math",         "igamma igamma.out igamma_"},
    {"math",         "igammac igammac.out igammac_"},
    {"patches",      "im2col im2col.out"},
    {"index",        "index.Tensor"},
    {"index",        "index_add index_add.out index_add_"},
    {"index",        "index_copy index_copy.out index_copy_"},
    {"index",        "index_fill_.int_Scalar index_fill_.int_Tensor"},
    {"index",        "index_reduce index_reduce.out index_reduce_"},
    {"index",        "index_select index_select.out"},
    {"sort",         "isin.Scalar_Tensor isin.Scalar_Tensor_out isin.Tensor_Scalar isin.Tensor_Scalar_out"},
    {"sort",         "isin.Tensor_Tensor isin.Tensor_Tensor_out"},
    {"pointwise",    "isnan isnan.out"},
    {"pointwise",    "isneginf isneginf.out"},
    {"pointwise",    "isposinf isposinf.out"},
    {"sort",         "kthvalue.values"},
    {"pointwise",    "le.Scalar le.Scalar_out le.Tensor le.Tensor_out le_.Scalar le_.Tensor"},
    {"activation",   "leaky_relu leaky_relu.out leaky_relu_"},
    {"activation",   "leaky_relu_backward leaky_relu_backward.grad_input"},
    {"select",       "lerp.Scalar lerp.Scalar_out lerp.Tensor lerp.Tensor_out lerp_.Scalar lerp_.Tensor"},
    {"math",         "lgamma lgamma.out lgamma_"},
    {"linalg",       "linalg_cholesky_ex linalg_cholesky_ex.L"},
    {"matrix",       "linalg_cross linalg_cross.out"},
    {"decompose",    "linalg_householder_product linalg_householder_product.out"},
    {"linalg_solve", "linalg_inv_ex linalg_inv_ex.inverse"},
    {"linalg_solve", "linalg_ldl_factor_ex linalg_ldl_factor_ex.out"},
    {"linalg_solve", "linalg_ldl_solve linalg_ldl_solve.out"},
    {"decompose",    "linalg_lstsq linalg_lstsq.out"},
    {"linalg",       "linalg_lu linalg_lu.out"},
    {"linalg",       "linalg_lu_factor_ex linalg_lu_factor_ex.out"},
    {"linalg",       "linalg_lu_solve linalg_lu_solve.out"},
    {"decompose",    "linalg_matrix_exp"},
    {"decompose",    "linalg_qr linalg_qr.out"},
    {"linalg",       "linalg_solve_triangular linalg_solve_triangular.out"},
    {"stats",        "linalg_vector_norm linalg_vector_norm.out"},
    {"nn",           "linspace.out"},
    {"pointwise",    "log log.out log_"},
    {"math",         "log10 log10.out log10_"},
    {"pointwise",    "log1p log1p.out log1p_"},
    {"pointwise",    "log2 log2.out log2_"},
    {"random",       "log_normal_"},
    {"activation",   "log_sigmoid_backward log_sigmoid_backward.grad_input"},
    {"activation",   "log_sigmoid_forward log_sigmoid_forward.output"},
    {"math",         "logaddexp logaddexp.out"},
    {"math",         "logaddexp2 logaddexp2.out"},
    {"pointwise",    "logical_and logical_and.out logical_and_"},
    {"pointwise",    "logical_not logical_not.out logical_not_"},
    {"pointwise",    "logical_or logical_or.out logical_or_"},
    {"pointwise",    "logical_xor logical_xor.out logical_xor_"},
    {"math",         "logit logit.out logit_"},
    {"math",         "logit_backward logit_backward.grad_input"},
    {"nn",           "logspace.out"},
    {"pointwise",    "lt.Scalar lt.Scalar_out lt.Tensor lt.Tensor_out lt_.Scalar lt_.Tensor"},
    {"linalg",       "lu_unpack lu_unpack.out"},
    {"select",       "masked_fill_.Scalar masked_fill_.Tensor"},
    {"index",        "masked_scatter_"},
    {"compact",      "masked_select masked_select.out"},
    {"reduce",       "max max.dim max.dim_max max.unary_out"},
    {"pool",         "max_pool2d_with_indices max_pool2d_with_indices.out"},
    {"pool",         "max_pool2d_with_indices_backward max_pool2d_with_indices_backward.grad_input"},
    {"pool",         "max_pool3d_with_indices max_pool3d_with_indices.out"},
    {"pool",         "max_pool3d_with_indices_backward max_pool3d_with_indices_backward.grad_input"},
    {"pool",         "max_unpool2d max_unpool2d.out"},
    {"pool",         "max_unpool3d max_unpool3d.out"},
    {"pointwise",    "maximum maximum.out"},
    {"reduce",       "mean.dim mean.out"},
    {"sort",         "median median.dim_values"},
    {"reduce",       "min min.dim min.dim_min min.unary_out"},
    {"pointwise",    "minimum minimum.out"},
    {"activation",   "mish mish.out mish_"},
    {"activation",   "mish_backward"},
    {"nn",           "mm mm.out"},
    {"sort",         "mode mode.values"},
    {"loss",         "mse_loss mse_loss.out"},
    {"loss",         "mse_loss_backward mse_loss_backward.grad_input"},
    {"pointwise",    "mul.Tensor mul.out mul_.Tensor"},
    {"margin_loss",  "multi_margin_loss multi_margin_loss.out"},
    {"margin_loss",  "multi_margin_loss_backward multi_margin_loss_backward.grad_input"},
    {"margin_loss",  "multilabel_margin_loss_backward multilabel_margin_loss_backward.grad_input"},
    {"margin_loss",  "multilabel_margin_loss_forward multilabel_margin_loss_forward.output"},
    {"random",       "multinomial multinomial.out"},
    {"nn",           "mv"},
    {"math",         "mvlgamma.out"},
    {"math",         "nan_to_num nan_to_num.out nan_to_num_"},
    {"sort",         "nanmedian nanmedian.dim_values"},
    {"sums",         "nansum nansum.out"},
    {"slices",       "narrow_copy narrow_copy.out"},
    {"norm",         "native_batch_norm native_batch_norm.out"},
    {"norm",         "native_batch_norm_backward"},
    {"random",       "native_dropout"},
    {"random",       "native_dropout_backward"},
    {"norm",         "native_group_norm"},
    {"group_norm",   "native_group_norm_backward"},
    {"softmax",      "native_layer_norm"},
    {"softmax",      "native_layer_norm_backward"},
    {"pointwise",    "ne.Scalar ne.Scalar_out ne.Tensor ne.Tensor_out ne_.Scalar ne_.Tensor"},
    {"pointwise",    "neg neg.out neg_"},
    {"math",         "nextafter nextafter.out nextafter_"},
    {"nll",          "nll_loss2d_backward"},
    {"nll",          "nll_loss2d_forward"},
    {"nll",          "nll_loss_backward"},
    {"nll",          "nll_loss_forward"},
    {"compact",      "nonzero nonzero.out"},
    {"compact",      "nonzero_static nonzero_static.out"},
    {"stats",        "norm.dtype_out norm.out"},
    {"random",       "normal.Tensor_Tensor normal.Tensor_Tensor_out normal.Tensor_float normal.Tensor_float_out"},
    {"random",       "normal.float_Tensor normal.float_Tensor_out normal_"},
    {"decompose",    "ormqr ormqr.out"},
    {"complex",      "polar.out"},
    {"math",         "polygamma polygamma.out polygamma_"},
    {"pointwise",    "pow.Scalar pow.Tensor_Scalar pow.Tensor_Scalar_out pow.Tensor_Tensor"},
    {"pointwise",    "pow.Tensor_Tensor_out pow_.Scalar pow_.Tensor"},
    {"sums",         "prod prod.dim_int prod.int_out prod.out"},
    {"scatter",      "put_"},
    {"random",       "random_ random_.from random_.to"},
    {"random",       "randperm.generator_out"},
    {"pointwise",    "reciprocal reciprocal.out reciprocal_"},
    {"core",         "record_stream"},
    {"pad",          "reflection_pad1d reflection_pad1d.out"},
    {"pad",          "reflection_pad1d_backward reflection_pad1d_backward.grad_input"},
    {"pad",          "reflection_pad2d reflection_pad2d.out"},
    {"pad",          "reflection_pad2d_backward reflection_pad2d_backward.grad_input"},
    {"pad",          "reflection_pad3d reflection_pad3d.out"},
    {"pad",          "reflection_pad3d_backward reflection_pad3d_backward.grad_input"},
    {"pointwise",    "relu relu_"},
    {"pointwise",    "remainder.Scalar remainder.Scalar_Tensor remainder.Scalar_out remainder.Tensor remainder.Tensor_out"},
    {"pointwise",    "remainder_.Scalar remainder_.Tensor"},
    {"stats",        "renorm renorm.out renorm_"},
    {"compact",      "repeat_interleave.Tensor"},
    {"pad",          "replication_pad1d replication_pad1d.out"},
    {"pad",          "replication_pad1d_backward replication_pad1d_backward.grad_input"},
    {"pad",          "replication_pad2d replication_pad2d.out"},
    {"pad",          "replication_pad2d_backward replication_pad2d_backward.grad_input"},
    {"pad",          "replication_pad3d replication_pad3d.out"},
    {"pad",          "replication_pad3d_backward replication_pad3d_backward.grad_input"},
    {"core",         "resize_"},
    {"scan",         "roll"},
    {"math",         "round.decimals round.decimals_out round_.decimals"},
    {"pointwise",    "round round.out round_"},
    {"activation",   "rrelu_with_noise rrelu_with_noise.out rrelu_with_noise_"},
    {"pointwise",    "rsqrt rsqrt.out rsqrt_"},
    {"pointwise",    "rsub.Tensor"},
    {"scatter",      "scatter.reduce scatter.reduce_out scatter.src scatter.src_out scatter.value"},
    {"scatter",      "scatter.value_out scatter.value_reduce scatter.value_reduce_out scatter_.reduce"},
    {"scatter",      "scatter_.src scatter_.value scatter_.value_reduce"},
    {"scatter",      "scatter_add scatter_add.out scatter_add_"},
    {"scatter",      "scatter_reduce.two scatter_reduce.two_out scatter_reduce_.two"},
    {"sort",         "searchsorted.Scalar searchsorted.Scalar_out searchsorted.Tensor searchsorted.Tensor_out"},
    {"segment",      "segment_reduce"},
    {"core",         "set_.source_Storage set_.source_Storage_storage_offset set_.source_Tensor"},
    {"pointwise",    "sgn sgn.out sgn_"},
    {"pointwise",    "sigmoid sigmoid.out sigmoid_"},
    {"select",       "sigmoid_backward"},
    {"pointwise",    "sign sign.out sign_"},
    {"math",         "signbit signbit.out"},
    {"pointwise",    "silu silu.out silu_"},
    {"select",       "silu_backward"},
    {"pointwise",    "sin sin.out sin_"},
    {"math",         "sinc sinc.out sinc_"},
    {"math",         "sinh sinh.out sinh_"},
    {"loss",         "smooth_l1_loss smooth_l1_loss.out"},
    {"loss",         "smooth_l1_loss_backward smooth_l1_loss_backward.grad_input"},
    {"activation",   "softplus softplus.out"},
    {"activation",   "softplus_backward softplus_backward.grad_input"},
    {"activation",   "softshrink softshrink.out"},
    {"activation",   "softshrink_backward softshrink_backward.grad_input"},
    {"sort",         "sort.stable sort.values_stable"},
    {"math",         "special_airy_ai special_airy_ai.out"},
    {"math",         "special_bessel_j0 special_bessel_j0.out"},
    {"math",         "special_bessel_j1 special_bessel_j1.out"},
    {"math",         "special_bessel_y0 special_bessel_y0.out"},
    {"math",         "special_bessel_y1 special_bessel_y1.out"},
    {"math",         "special_chebyshev_polynomial_t.out"},
    {"math",         "special_chebyshev_polynomial_u.out"},
    {"math",         "special_chebyshev_polynomial_v.out"},
    {"math",         "special_chebyshev_polynomial_w.out"},
    {"math",         "special_entr special_entr.out"},
    {"math",         "special_erfcx special_erfcx.out"},
    {"math",         "special_hermite_polynomial_h.out"},
    {"math",         "special_hermite_polynomial_he.out"},
    {"math",         "special_i0e special_i0e.out"},
    {"math",         "special_i1 special_i1.out"},
    {"math",         "special_i1e special_i1e.out"},
    {"math",         "special_laguerre_polynomial_l.out"},
    {"math",         "special_legendre_polynomial_p.out"},
    {"math",         "special_log_ndtr special_log_ndtr.out"},
    {"math",         "special_modified_bessel_i0 special_modified_bessel_i0.out"},
    {"math",         "special_modified_bessel_i1 special_modified_bessel_i1.out"},
    {"math",         "special_modified_bessel_k0 special_modified_bessel_k0.out"},
    {"math",         "special_modified_bessel_k1 special_modified_bessel_k1.out"},
    {"math",         "special_ndtri special_ndtri.out"},
    {"math",         "special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k0.out"},
    {"math",         "special_scaled_modified_bessel_k1 special_scaled_modified_bessel_k1.out"},
    {"math",         "special_shifted_chebyshev_polynomial_t.out"},
    {"math",         "special_shifted_chebyshev_polynomial_u.out"},
    {"math",         "special_shifted_chebyshev_polynomial_v.out"},
    {"math",         "special_shifted_chebyshev_polynomial_w.out"},
    {"math",         "special_spherical_bessel_j0 special_spherical_bessel_j0.out"},
    {"math",         "special_xlog1py special_xlog1py.out"},
    {"math",         "special_zeta.out"},
    {"pointwise",    "sqrt sqrt.out sqrt_"},
    {"stats",        "std.correction std.correction_out"},
    {"stats",        "std_mean.correction"},
    {"pointwise",    "sub.Tensor sub.out sub_.Tensor"},
    {"reduce",       "sum.IntList_out sum.dim_IntList"},
    {"scatter",      "take take.out"},
    {"math",         "tan tan.out tan_"},
    {"pointwise",    "tanh tanh.out tanh_"},
    {"select",       "tanh_backward"},
    {"activation",   "threshold threshold.out threshold_"},
    {"select",       "threshold_backward"},
    {"sort",         "topk topk.values"},
    {"matrix",       "trace"},
    {"linalg",       "triangular_solve triangular_solve.X"},
    {"nn",           "tril tril.out tril_"},
    {"nn",           "triu triu.out triu_"},
    {"pointwise",    "trunc trunc.out trunc_"},
    {"core",         "unfold"},
    {"slices",       "unfold_backward unfold_backward.out"},
    {"random",       "uniform_"},
    {"compact",      "unique_consecutive"},
    {"compact",      "unique_dim"},
    {"compact",      "unique_dim_consecutive"},
    {"resample",     "upsample_bicubic2d upsample_bicubic2d.out"},
    {"resample",     "upsample_bicubic2d_backward upsample_bicubic2d_backward.grad_input"},
    {"resample",     "upsample_bilinear2d upsample_bilinear2d.out"},
    {"resample",     "upsample_bilinear2d_backward upsample_bilinear2d_backward.grad_input"},
    {"resample",     "upsample_linear1d upsample_linear1d.out"},
    {"resample",     "upsample_linear1d_backward upsample_linear1d_backward.grad_input"},
    {"resample",     "upsample_nearest1d upsample_nearest1d.out"},
    {"resample",     "upsample_nearest1d_backward upsample_nearest1d_backward.grad_input"},
    {"resample",     "upsample_nearest2d upsample_nearest2d.out"},
    {"resample",     "upsample_nearest2d_backward upsample_nearest2d_backward.grad_input"},
    {"resample",     "upsample_nearest3d upsample_nearest3d.out"},
    {"resample",     "upsample_nearest3d_backward upsample_nearest3d_backward.grad_input"},
    {"resample",     "upsample_trilinear3d upsample_trilinear3d.out"},
    {"resample",     "upsample_trilinear3d_backward upsample_trilinear3d_backward.grad_input"},
    {"stats",        "var.correction var.correction_out"},
    {"stats",        "var_mean.correction"},
    {"matrix",       "vdot"},
    {"core",         "view"},
    {"complex",      "view_as_complex"},
    {"complex",      "view_as_real"},
    {"select",       "where.self where.self_out"},
    {"math",         "xlogy.OutTensor xlogy.Tensor xlogy_.Tensor"},
    {"core",         "zero_"},
};
// clang-format on

struct Bound {
  std::string family;
  torch::CppFunction fn;
};
std::map<std::string, Bound>* sink = nullptr;  // during register_kernels()
std::vector<std::pair<std::string, std::string>> table;  // kTable, its prefix rows expanded

std::vector<std::pair<std::string, FamilyFn>>& families() {
  static std::vector<std::pair<std::string, FamilyFn>> v;
  return v;
}

std::string family_of(const char* file) {
  std::string f = file;
  f = f.substr(f.find_last_of('/') + 1);
  const std::string prefix = "kernels_", suffix = ".cpp";
  if (f.rfind(prefix, 0) == 0) f = f.substr(prefix.size());
  if (f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
    f.resize(f.size() - suffix.size());
  return f;
}

std::vector<std::string> split(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ' ' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

// The name rows sort by: the op before its overload, without the in-place '_'.
std::string sort_key(const std::string& overload) {
  std::string k = overload.substr(0, overload.find('.'));
  if (k.size() > 1 && k.back() == '_') k.pop_back();
  return k;
}

}  // namespace

void device_mismatch(const char* op, c10::Device a, c10::Device b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a, " and ", b,
              "! (in ", op, ")");
}

bool add_family(const char* file, FamilyFn fn) {
  families().emplace_back(family_of(file), fn);
  return true;
}

eager::OpCounter* Registrar::counter(const char* name) {
  static std::deque<std::string> names;
  static std::deque<eager::OpCounter> counters;
  names.push_back(std::string("aten::") + name);
  return &counters.emplace_back(names.back().c_str());
}

void Registrar::add(const char* name, torch::CppFunction f) {
  TORCH_INTERNAL_ASSERT(sink, "kernels are bound only inside register_kernels()");
  auto [it, fresh] = sink->try_emplace(name, Bound{family_, std::move(f)});
  TORCH_CHECK(fresh, "torchtpu: aten::", name, " is bound twice (kernels_", it->second.family, ".cpp and kernels_",
              family_, ".cpp)");
}

void Registrar::boxed(const char* name, BoxedFn fn) {
  add(name, torch::CppFunction::makeFromBoxedKernel(
                c10::BoxedKernel::makeFromFunctor(std::make_unique<registry_detail::CountedBoxed>(counter(name), fn))));
}

std::vector<std::pair<std::string, std::string>> kernel_table() { return table; }

void register_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::map<std::string, Bound> bound;
    sink = &bound;
    for (const auto& [family, fn] : families()) {
      Registrar r(family);
      fn(r);
    }
    sink = nullptr;
    static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    std::string problems, last;
    for (const Row& row : kTable) {
      std::vector<std::string> names = split(row.overloads);
      if (names.size() == 1 && names[0].back() == '*') {  // a prefix row: its family's overloads of the prefix
        const std::string prefix = names[0].substr(0, names[0].size() - 1);
        std::map<std::pair<std::string, std::string>, std::string> sorted;
        for (const auto& [o, b] : bound)
          if (o.rfind(prefix, 0) == 0 && b.family == row.family) sorted[{sort_key(o), o}] = o;
        names.clear();
        for (const auto& kv : sorted) names.push_back(kv.second);
      }
      for (const std::string& o : names) {
        if (sort_key(o) < last) problems += "  out of order: " + o + "\n";
        last = sort_key(o);
        table.emplace_back(o, row.family);
        auto it = bound.find(o);
        if (it == bound.end()) {
          problems += "  listed, bound by no family: " + o + "\n";
        } else if (it->second.family != row.family) {
          problems += "  " + o + " is bound by kernels_" + it->second.family + ".cpp, listed under " + row.family + "\n";
        } else {
          lib.impl(o.c_str(), std::move(it->second.fn));
          bound.erase(it);
        }
      }
    }
    for (const auto& [o, b] : bound) problems += "  bound by kernels_" + b.family + ".cpp, not listed: " + o + "\n";
    TORCH_CHECK(problems.empty(), "torchtpu: the kernel table (csrc/aten/registry.cpp) and the family files disagree:\n",
                problems);
  });
}

}  // namespace torchtpu::aten

"""The one tolerance table of the OpInfo sweep, and the ops whose values cannot
be compared with the CPU's.

A comparison uses the first row found, most specific first:
(op, variant, dtype), (op, None, dtype), (op, variant, None), (op, None, None),
(None, variant, dtype), (None, None, dtype). `op` is the OpInfo entry's full
name ("name" or "name.variant_test_name"), `variant` one of harness.VARIANTS.
Each row is (atol, rtol, reason); every loosening past PyTorch's own defaults
(those of torch.testing.assert_close, used for a dtype with no row) says why.
"""
import contextlib

import torch

f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16

TOLERANCES = {
    # Defaults: PyTorch's assert_close tolerances for the dtype.
    (None, None, f32): (1e-5, 1.3e-6, "assert_close default"),
    (None, None, bf16): (1e-5, 1.6e-2, "assert_close default"),
    (None, None, f16): (1e-5, 1e-3, "assert_close default"),
    (None, None, torch.int64): (0, 0, "exact"),
    (None, None, torch.int32): (0, 0, "exact"),
    (None, None, torch.bool): (0, 0, "exact"),
    # Gradients of bfloat16/float16 samples: many are sums that cancel analytically (the gradient of a
    # sum of softmax outputs is zero), where both sides keep rounding noise of about the dtype's epsilon
    # times the terms (~1): bf16 eps 7.8e-3, f16 eps 9.8e-4.
    (None, "grad", bf16): (1e-2, 1.6e-2, "cancelling sums keep noise of ~bf16 epsilon"),
    (None, "grad", f16): (1e-3, 1e-3, "cancelling sums keep noise of ~f16 epsilon"),
}

# Contractions: with samples in [-9, 9], the partial sums of a dot product reach ~1e3, whose float32
# ulp is 6e-5; XLA:CPU's dot sums in another order than the CPU's BLAS, so a result near zero after
# cancellation differs by a few of those ulps.
for _op in ("matmul", "__rmatmul__", "mm", "bmm", "addmm", "addmm.decomposed", "addbmm", "baddbmm", "addmv",
            "mv", "addr", "dot", "vdot", "inner", "tensordot", "einsum", "linalg.multi_dot", "linalg.matmul",
            "nn.functional.linear", "nn.functional.bilinear", "chain_matmul", "linalg.vecdot"):
    TOLERANCES[(_op, None, f32)] = (1e-4, 1.3e-6, "dot products summed in another order; partial sums ~1e3")

# Convolutions: up to ~100 products of samples in [-9, 9] per output, partial sums ~1e4 (ulp 1e-3),
# summed in another order by XLA:CPU than by the CPU's oneDNN/im2col kernels.
for _op in ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
            "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d",
            "conv_transpose2d", "conv_transpose3d", "nn.functional.conv2d.stride_groups_paddings"):
    TOLERANCES[(_op, None, f32)] = (5e-4, 1e-5, "convolution sums in another order; partial sums ~1e4")

# bfloat16/float16 contractions and convolutions: the device and the CPU round the dot product (or
# the bias added to it) at different points, so a result that cancels down from terms of ~1e2 keeps
# up to half a ulp of the terms: 0.25 in bf16, 0.03 in f16. A reduction accumulated in the half
# dtype (error growing with the number of terms) still fails.
for (_op, _, _dt), _row in list(TOLERANCES.items()):
    if _dt == f32 and ("dot products" in _row[2] or "convolution" in _row[2]):
        TOLERANCES[(_op, None, bf16)] = (0.25, 1.6e-2, "half a bf16 ulp of terms of ~1e2")
        TOLERANCES[(_op, None, f16)] = (0.03, 1e-3, "half an f16 ulp of terms of ~1e2")

_ZERO_GRAD = ("the input gradient of a one-element normalization is zero; the CPU leaves ~2e-5 of rounding "
              "noise (rsqrt(eps) = 316)")
TOLERANCES.update({
    ("nn.functional.ctc_loss", "grad", f32): (
        1e-4, 1.3e-6, "exp(lp) - exp(lcab + nll - lp) cancels with nll ~1e2: the CPU's float32 gradient is "
        "7.6e-5 from the float64 one on these samples, the device's as far, 2.4e-5 from the CPU's"),
    ("native_layer_norm", "grad", f32): (1e-4, 1.3e-6, _ZERO_GRAD),
    ("nn.functional.layer_norm", "grad", f32): (1e-4, 1.3e-6, _ZERO_GRAD),
    ("nn.functional.scaled_dot_product_attention", None, f32): (
        5e-5, 5e-6, "PyTorch's own test_compare_cpu tolerance for this op (toleranceOverride in op_db)"),
    ("linalg.lstsq", "grad", f32): (1e-4, 1e-5, "the gradient of a least-squares solve scales rounding "
                                    "by the condition number"),
    ("linalg.lstsq.grad_oriented", "grad", f32): (1e-4, 1e-5, "as linalg.lstsq"),
    # Both float32 results of exp(A) for samples with 1-norms ~25 sit ~7.5e-6 (relative) from the float64 truth
    # (each of the ~4 squarings doubles the rounding), in different directions: they differ by up to ~1.4e-5.
    # Entries that cancel to ~0.1 inside results of norm ~3e4 carry that norm's rounding (3e-7 of 3e4 = 1e-2).
    ("matrix_exp", None, f32): (1e-2, 3e-5, "scaling and squaring: both sides ~7.5e-6 from the float64 truth, "
                                "entries off by ~3e-7 of the result's norm"),
    ("matrix_exp", "grad", f32): (1e-3, 1e-4, "the gradient is the exponential of a block matrix of twice the "
                                  "norm: one more squaring"),
    # Eigen- and singular-vector gradients divide by eigenvalue gaps (1 / (l_i - l_j)): the ~1 ulp by which the
    # device's Jacobi vectors differ from LAPACK's comes back multiplied by it (seen: 3.4e-5 on 0.077, 5e-5 on
    # 14).
    **{(_op, "grad", f32): (1e-4, 1e-5, "vector gradients divide the vectors' rounding by eigenvalue gaps")
       for _op in ("linalg.eigh", "linalg.cond", "linalg.pinv.hermitian", "linalg.pinv", "linalg.svd", "svd",
                   "linalg.matrix_norm", "norm.nuc", "pinverse", "linalg.pinv.singular")},
    ("nn.functional.multi_head_attention_forward", None, f32): (
        1e-4, 1e-4, "projected samples give attention logits of ~1e3, whose softmax amplifies the projections' "
        "rounding (seen: 4e-5 relative on outputs of ~1e3)"),
    ("nn.functional.multi_head_attention_forward", None, bf16): (0.25, 1.6e-2, "as the bf16 contractions"),
    ("cov", "grad", f32): (1e-4, 1.3e-6, "the float32 aweights gradient of a 16-bit sample cancels to ~0 from terms "
                           "of ~1e2; float32 sums in another order leave up to 6e-5"),
    ("nn.functional.normalize", "grad", bf16): (
        0.0625, 1.6e-2, "terms of ~8 cancel to ~0 (one bf16 ulp of them is 0.0625), and the CPU's bf16 pow(-0.5) "
        "rounds once or twice depending on the element's position (vectorized body or tail)"),
    # Found in Fused mode, where XLA contracts a multiply and an add of one program into one rounding.
    ("asin", "grad", f32): (1e-5, 1e-5, "1 / sqrt(1 - x*x) near |x| = 1 amplifies the rounding of 1 - x*x "
                            "(one multiply-add in a Fused program, two roundings on the CPU)"),
    ("linalg.householder_product", "grad", f32): (1e-3, 1e-4, "products of reflectors whose samples' taus (up to "
                                                  "~4.4) are not those of reflections: each factor scales the "
                                                  "rounding of the others by up to |tau| |v|^2"),
})

# Measured against float64 (max error of each side, largest magnitude of the result): XLA's FFT and the CPU's
# pocketfft round differently; the error scales with the largest output, not each element (hfft2 of a
# [5, 6, 7] sample: CPU 2.2e-5, device 2.3e-5, outputs up to 251).
for _op in ("fft.hfft2", "fft.hfftn", "fft.irfft2", "fft.irfftn"):
    TOLERANCES[(_op, None, f32)] = (5e-5, 1.3e-6, "FFT rounding scales with the largest output (~2e-5 at 251, "
                                    "both sides alike against float64)")
# The exponent's gradient is a sum over the [10, 5] sample (CPU 1.6e-5, device 4.5e-5 from float64 at 28.85).
TOLERANCES[("ldexp", "grad", f32)] = (1e-4, 1.3e-6, "a 50-term gradient sum in another order (both within "
                                       "1.6e-6 relative of float64)")
# The device is the closer one: 2.8e-5 from float64 against the CPU's 3.7e-5, at values up to 8.6.
TOLERANCES[("special.log_ndtr", "grad", f32)] = (1e-4, 1.3e-6, "exp(-x^2/2)/ndtr(x) in the left tail: the "
                                                  "CPU is 3.7e-5 from float64, the device 2.8e-5")

# The grid gradient sums value differences times unnormalization factors of up to size / 2 over taps and
# channels: against a float64 reference both the CPU's and the device's float32 gradients are off by up to ~4.5e-4
# (a [20, 21, 22, 23, 24] input; 1.6e-4 for 2-D bicubic), in different directions (seen: 2.9e-4 apart).
for _op in ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample"):
    TOLERANCES[(_op, "grad", f32)] = (1e-3, 1e-5, "float32 grid gradients sit ~4.5e-4 from the float64 truth on "
                                      "both sides")

# The CPU's vectorized 16-bit bilinear kernel (taken for outputs of at most 128 rows + columns) rounds its partial
# sums to the 16-bit type; the device interpolates in float32 and rounds once. On results where terms of up to ~4
# cancel, that is up to two ulps of the terms (seen: 0.021 in bf16, 0.0024 in f16).
for _op in ("nn.functional.interpolate.bilinear", "nn.functional.upsample_bilinear"):
    TOLERANCES[(_op, None, bf16)] = (0.03, 1.6e-2, "the CPU's vectorized bilinear kernel rounds partial sums to bf16")
    TOLERANCES[(_op, None, f16)] = (4e-3, 1e-3, "the CPU's vectorized bilinear kernel rounds partial sums to f16")

# The CPU's 16-bit batch norm backward takes another path when the incoming gradient is expanded (the
# sweep differentiates .sum(), whose gradient has stride 0): it rounds x - mean to the 16-bit type before
# the float32 sums, so its weight gradient differs from its own contiguous-gradient result by ~3e-3
# (f16) / 2e-2 (bf16). The device matches the contiguous path exactly.
#
# Its 4-D bfloat16 forward rounds the batch's inverse standard deviation a step or two more in bfloat16 than the
# 3-D path does and lands one bfloat16 ulp below the correctly rounded value (0.22363 against 0.22461 =
# 1/sqrt(19.40135 + 0.5) rounded); the device rounds once. Where the normalized output cancels, that ulp is up to
# 0.023 of the result.
for _op in ("_batch_norm_with_update", "_native_batch_norm_legit", "native_batch_norm", "nn.functional.batch_norm",
            "nn.functional.instance_norm"):
    TOLERANCES[(_op, None, bf16)] = (0.03, 1.6e-2, "the CPU's 4-D bf16 path rounds invstd once or twice more")
    TOLERANCES[(_op, "grad", f16)] = (3e-3, 1e-3, "the CPU's expanded-gradient path rounds x - mean to float16")
    TOLERANCES[(_op, "grad", bf16)] = (2e-2, 1.6e-2, "the CPU's expanded-gradient path rounds x - mean to bfloat16")

# Ops whose output values are random or uninitialized: only the shape, dtype and
# device of each output are compared with the CPU's (the values cannot be).
METADATA_ONLY = {
    "bernoulli": "random", "cauchy": "random", "exponential": "random", "geometric": "random",
    "log_normal": "random", "multinomial": "random", "normal": "random", "normal.in_place": "random",
    "normal.number_mean": "random", "uniform": "random", "rand_like": "random", "randn_like": "random",
    "randint_like": "random", "randint": "random", "randn": "random",
    "nn.functional.dropout": "random", "nn.functional.dropout2d": "random",
    "nn.functional.dropout3d": "random", "nn.functional.alpha_dropout": "random",
    "nn.functional.feature_alpha_dropout.with_train": "random", "nn.functional.rrelu": "random",
    "empty": "uninitialized", "empty_like": "uninitialized", "empty_permuted": "uninitialized",
    "empty_strided": "uninitialized", "new_empty": "uninitialized", "new_empty_strided": "uninitialized",
    "nn.functional.fractional_max_pool2d": "random pooling regions",
    "nn.functional.fractional_max_pool3d": "random pooling regions", "svd_lowrank": "random projection",
    "pca_lowrank": "random projection",
    # (variant, op): converting NaN or +-Inf to an integer type is undefined behaviour in C++; the CPU's
    # value is whatever its conversion instruction gives.
    ("nonfinite", "byte"): "NaN/Inf to uint8 is undefined", ("nonfinite", "char"): "NaN/Inf to int8 is undefined",
    ("nonfinite", "short"): "NaN/Inf to int16 is undefined", ("nonfinite", "int"): "NaN/Inf to int32 is undefined",
    ("nonfinite", "long"): "NaN/Inf to int64 is undefined",
    # PyTorch's CPU kernels for these (which the device also runs, through the CPU fallback) are not
    # deterministic for a NaN x: two calls on the same inputs gave -8.5e-11 and -2.3e-22.
    # The shifted ones too (three calls: 1.1e38, -3.4e-38, 1.4e-45).
    **{("nonfinite", f"special.{s}chebyshev_polynomial_{k}"): "the CPU kernel is not deterministic for NaN x"
       for k in "tuvw" for s in ("", "shifted_")},
    # The CPU sorts slices of more than 16 elements with introsort and `<`, for which NaN is neither smaller nor
    # larger: where NaNs land (splitting runs of equal values) is its sort's business. The device sorts NaN last.
    ("nonfinite", "mode"): "the CPU's introsort places NaN arbitrarily in slices of more than 16 elements",
    # The gradient lands on the index mode returns: in slices of more than 16 elements, one of the mode's
    # positions that the CPU's introsort picks (the indices themselves are checked by the tie-aware comparison).
    ("grad", "mode"): "the gradient goes to whichever position of the mode the sort picked",
    # MKL's snrm2 skips NaN: a column [0.81, NaN, ...] gets the norm 0.81 and an identity reflector, so the
    # CPU's R keeps a finite diagonal entry where the device's Householder step gives NaN.
    ("nonfinite", "linalg.qr"): "MKL's norm skips NaN in the Householder column",
    ("nonfinite", "qr"): "MKL's norm skips NaN in the Householder column",
    ("nonfinite", "geqrf"): "MKL's norm skips NaN in the Householder column",
    # Their CPU loops stop at a NaN before the first step and return an uninitialized value.
    ("nonfinite", "special.laguerre_polynomial_l"): "the CPU kernel returns an uninitialized value for NaN x",
    ("nonfinite", "special.legendre_polynomial_p"): "the CPU kernel returns an uninitialized value for NaN x",
    # With a NaN in the matrix, MKL's Bunch-Kaufman pivot choices are not reference LAPACK's (which the device
    # follows); the factors are NaN either way.
    ("nonfinite", "linalg.ldl_factor_ex"): "MKL's pivots for a matrix holding NaN are not LAPACK's",
    ("nonfinite", "linalg.ldl_factor"): "MKL's pivots for a matrix holding NaN are not LAPACK's",
    # ihfft's result is a conjugate view, so the out= template made like it carries the conjugate bit; PyTorch's
    # out= kernel then writes a resolved copy and leaves `out` as it was (uninitialized memory), on the CPU as on
    # the device (seen: an out filled with 7+7j stays 7+7j on both).
    **{("out", op): "out= with a conjugate template is left unwritten on both sides"
       for op in ("fft.ihfft", "fft.ihfft2", "fft.ihfftn")},
}


# Samples with NaN/Inf written in, where the device's NaN may stand for any CPU value (every other
# element is still compared). XLA's convolution multiplies the zero padding and the zeros that a
# transposed convolution's stride inserts, as cuDNN's implicit GEMM does; the CPU's oneDNN/im2col
# kernels skip them. So an infinite or NaN weight gives NaN (0 * inf) at outputs whose window
# reaches padding, where the CPU gives an infinity or a finite sum.
_PADDING_TIMES_INF = "XLA's convolution multiplies padding zeros by the infinite/NaN weights; the CPU skips them"
NONFINITE_DEVICE_NAN_OK = {
    op: _PADDING_TIMES_INF
    for op in ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
               "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
               "nn.functional.conv_transpose3d", "conv_transpose2d", "conv_transpose3d",
               "nn.functional.conv2d.stride_groups_paddings")
}
# Every output of a DFT sums every input of its line. With an infinite input, XLA's transform multiplies it by
# each twiddle factor, zeros included (inf * 0 = NaN), and adds +-inf terms (inf - inf = NaN); pocketfft's
# factorization skips some of those products and sets the imaginary part of a real transform's DC term to 0.
NONFINITE_DEVICE_NAN_OK.update({
    op: "a DFT line holding inf: XLA multiplies it by zero twiddles and adds +-inf terms, pocketfft skips some"
    for op in ("fft.fft", "fft.fftn", "fft.fft2", "fft.ifft", "fft.ifftn", "fft.ifft2", "fft.rfft", "fft.rfftn",
               "fft.rfft2", "fft.ihfft", "fft.ihfft2", "fft.ihfftn", "fft.hfft", "fft.hfft2", "fft.hfftn",
               "fft.irfft", "fft.irfft2", "fft.irfftn", "stft", "istft")
})

# Samples compared with another CPU reference, computed under a context (op, variant) -> (factory, reason).
def _sdpa_math():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(SDPBackend.MATH)


@contextlib.contextmanager
def _lce_options_as_on_tpu():
    """F.linear_cross_entropy's chunked path picks its accumulation policy by device type: float32
    accumulation on the CPU and CUDA, the input's dtype (a "compact" policy) on any other device.
    The CPU reference is computed with the policy PyTorch picks for tpu."""
    from torch.nn.modules import linear_cross_entropy_options as lo
    saved_defaults, saved_resolve = dict(lo._AUTO_DEFAULTS), lo.LinearCrossEntropyOptions._resolve_auto_acc_dtype
    lo._AUTO_DEFAULTS.clear()
    lo.LinearCrossEntropyOptions._resolve_auto_acc_dtype = staticmethod(
        lambda dtype, device: saved_resolve(dtype, torch.device(torch._C._get_privateuse1_backend_name())))
    try:
        yield
    finally:
        lo._AUTO_DEFAULTS.update(saved_defaults)
        lo.LinearCrossEntropyOptions._resolve_auto_acc_dtype = staticmethod(saved_resolve)


_LCE_REASON = ("PyTorch resolves linear_cross_entropy's acc_policy='auto' per device type (float32 "
               "accumulation on cpu/cuda, the input dtype elsewhere); the reference uses tpu's resolution")

CPU_REFERENCE_CONTEXT = {
    **{(op, v): (_lce_options_as_on_tpu, _LCE_REASON)
       for op in ("nn.functional.linear_cross_entropy", "nn.functional.linear_cross_entropy.chunked",
                  "nn.functional.linear_cross_entropy.chunked_none")
       for v in ("functional", "out", "inplace", "grad", "nonfinite")},
    ("nn.functional.scaled_dot_product_attention", "nonfinite"): (
        _sdpa_math, "the CPU's flash kernel skips fully masked key blocks, so a NaN there never reaches the output; "
        "the device computes PyTorch's math backend (softmax weights of 0 times NaN values), which is the reference"),
}

# Decompositions whose vectors are unique only up to sign (each eigenvector, each pair of singular vectors; LAPACK
# and cuSOLVER differ there too): their functional and out= results are compared through the sample's own
# output_process_fn_grad, which op_db gives exactly these samples (|U|, |Vh| and U @ Vh with S; the eigenvalues
# with |Q|). Their samples have distinct eigen/singular values, so |.| pins the vectors down.
SIGN_GAUGE = {
    "linalg.eigh": "eigenvectors are unique up to sign",
    "linalg.svd": "singular vector pairs are unique up to sign",
    "svd": "singular vector pairs are unique up to sign",
}

# Positional arguments (indices into sample.args) that PyTorch takes on the CPU whatever the device
# of the input; they are not moved to the device.
HOST_ARGS = {
    "tensor_split": {0},  # tensor_indices_or_sections must be a CPU tensor
}

# Samples whose values are random (dropout active in training): only metadata is compared.
RANDOM_SAMPLES = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    "nn.functional.multi_head_attention_forward": lambda s: s.kwargs.get("training", True) and s.args[9] > 0,
}


def metadata_only(op: str, variant: str, sample) -> bool:
    """Whether only the shape, dtype and device of the outputs can be compared."""
    if op in METADATA_ONLY or (variant, op) in METADATA_ONLY:
        return True
    return op in RANDOM_SAMPLES and bool(RANDOM_SAMPLES[op](sample))


def tolerance(op: str, variant: str, dtype: torch.dtype):
    """(atol, rtol) for one comparison."""
    for key in ((op, variant, dtype), (op, None, dtype), (op, variant, None), (op, None, None),
                (None, variant, dtype), (None, None, dtype)):
        if key in TOLERANCES:
            atol, rtol, _ = TOLERANCES[key]
            return atol, rtol
    return None, None

"""The one tolerance table of the OpInfo sweep, and the ops whose values cannot
be compared with the CPU's.

A comparison uses the first row found, most specific first:
(op, variant, dtype), (op, None, dtype), (op, variant, None), (op, None, None),
(None, variant, dtype), (None, None, dtype). `op` is the OpInfo entry's full
name ("name" or "name.variant_test_name"), `variant` one of harness.VARIANTS.
Each row is (atol, rtol, reason); every loosening past PyTorch's own defaults
(those of torch.testing.assert_close, used for a dtype with no row) says why.
"""
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
}

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
    # (variant, op): converting NaN or +-Inf to an integer type is undefined behaviour in C++; the CPU's
    # value is whatever its conversion instruction gives.
    ("nonfinite", "byte"): "NaN/Inf to uint8 is undefined", ("nonfinite", "char"): "NaN/Inf to int8 is undefined",
    ("nonfinite", "short"): "NaN/Inf to int16 is undefined", ("nonfinite", "int"): "NaN/Inf to int32 is undefined",
    ("nonfinite", "long"): "NaN/Inf to int64 is undefined",
}


def tolerance(op: str, variant: str, dtype: torch.dtype):
    """(atol, rtol) for one comparison."""
    for key in ((op, variant, dtype), (op, None, dtype), (op, variant, None), (op, None, None),
                (None, variant, dtype), (None, None, dtype)):
        if key in TOLERANCES:
            atol, rtol, _ = TOLERANCES[key]
            return atol, rtol
    return None, None

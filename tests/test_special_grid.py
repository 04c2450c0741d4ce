"""Special functions over their whole float32 and float64 domains against the
CPU, at ulp-scale tolerances (tests/opinfo/special_grid.py, which runs the
denser grid: `make special-grid`, 512 points per binade); here 64."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "opinfo"))
import special_grid  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", sorted(special_grid.FUNCTIONS))
def test_special_function_on_a_dense_grid(name, dtype):
    r = special_grid.check(name, dtype, per_octave=64)
    assert r["failures"] == 0, r


def test_the_grid_tells_a_wrong_function_apart():
    # The comparison itself: a result 1e-6 off everywhere fails, the CPU's own passes.
    x = special_grid.grid(torch.float32, 4)
    ref = torch.special.erf(x)
    assert special_grid.ulps(ref, ref).max() == 0
    assert (special_grid.ulps(ref + 1e-6, ref) > special_grid.F32_ULPS).sum() > x.numel() // 2
    assert special_grid.ulps(torch.tensor([float("nan")]), torch.tensor([1.0])).isinf().all()

"""Each model of the zoo trains 5 steps on the device and on the CPU from the
same initial weights, in Debug, Strict and Fused mode, with the checks of
compare.assert_trains_as_on_cpu: the same losses, gradients at every step,
final weights and buffers, parameter sharing, and no CPU fallback."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import assert_trains_as_on_cpu  # noqa: E402
from zoo import ZOO  # noqa: E402

STEPS = 5


def _to(tree, device):
    if isinstance(tree, tuple):
        return tuple(_to(t, device) for t in tree)
    return tree.to(device)


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_trains_as_on_cpu(name, mode):
    build, batches_of, loss_fn = ZOO[name]
    torch.manual_seed(0)
    model = build()
    assert_trains_as_on_cpu(model, batches_of(STEPS),
                            lambda m, batch, device: loss_fn(m, _to(batch[0], device), _to(batch[1], device)), mode)

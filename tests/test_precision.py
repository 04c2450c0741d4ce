"""Matmul precision: torch.set_float32_matmul_precision and
torchtpu.precision(...) become the precision_config of float32
dot_general and convolution (checked in the StableHLO text), are part of
the graph key (a new precision compiles anew, a seen one hits the cache),
and leave the values (exact float32 on XLA:CPU) and other dtypes alone."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import debug


@pytest.fixture(autouse=True)
def restore_precision():
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)
    torchtpu.set_precision(None)


def configs(fn, *args):
    torch._dynamo.reset()  # each call compiles afresh (no recompile limit across tests)
    text = debug.stablehlo(fn, *args)
    lines = [l for l in text.splitlines() if "stablehlo.dot_general" in l or "stablehlo.convolution" in l]
    assert lines, text
    return [("HIGHEST" if "precision HIGHEST" in l else "HIGH" if "precision HIGH" in l else None) for l in lines]


def mm(a, b):
    return a @ b


def conv(x, w):
    return F.conv2d(x, w, padding=1)


A, B = torch.randn(6, 5), torch.randn(5, 4)
X, W = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)


@pytest.mark.parametrize("torch_level,want", [("highest", "HIGHEST"), ("high", "HIGH"), ("medium", None)])
def test_torch_setting(torch_level, want):
    torch.set_float32_matmul_precision(torch_level)
    assert configs(mm, A.to("tpu"), B.to("tpu")) == [want]
    assert configs(conv, X.to("tpu"), W.to("tpu")) == [want]


@pytest.mark.parametrize("level,want", [("highest", "HIGHEST"), ("high", "HIGH"), ("medium", None),
                                        ("default", None)])
def test_override(level, want):
    torch.set_float32_matmul_precision("high")
    with torchtpu.precision(level):
        assert configs(mm, A.to("tpu"), B.to("tpu")) == [want]
    assert configs(mm, A.to("tpu"), B.to("tpu")) == ["HIGH"]


def test_other_dtypes_unaffected():
    torch.set_float32_matmul_precision("highest")
    assert configs(mm, A.bfloat16().to("tpu"), B.bfloat16().to("tpu")) == [None]
    assert configs(mm, A.double().to("tpu"), B.double().to("tpu")) == [None]


def test_part_of_graph_key_and_values(each_mode):
    n = 7 + ("debug", "strict", "fused").index(each_mode)  # a shape no other test compiled
    a, b = torch.randn(n, 3).to("tpu"), torch.randn(3, 9).to("tpu")
    ref = a.cpu() @ b.cpu()
    results = {}
    debug.reset_metrics()
    for level in ("highest", "high", "medium"):
        with torchtpu.precision(level):
            results[level] = (a @ b).cpu()
    first = debug.metrics()["compilations"]
    assert first >= 3
    for level in ("highest", "high", "medium"):
        with torchtpu.precision(level):
            torch.testing.assert_close((a @ b).cpu(), results[level], rtol=0, atol=0)
    assert debug.metrics()["compilations"] == first  # each precision found its program again
    for r in results.values():
        torch.testing.assert_close(r, ref, rtol=1e-6, atol=1e-6)


def test_backward_inside_block():
    lin = torch.nn.Linear(5, 4).to("tpu")
    x = torch.randn(3, 5).to("tpu")
    with torchtpu.precision("medium"):
        lin(x).sum().backward()
    ref = torch.nn.Linear(5, 4)
    ref.load_state_dict({k: v.cpu() for k, v in lin.state_dict().items()})
    ref(x.cpu()).sum().backward()
    torch.testing.assert_close(lin.weight.grad.cpu(), ref.weight.grad, rtol=1e-6, atol=1e-6)


def test_bad_level():
    with pytest.raises(ValueError, match="unknown matmul precision 'fast'"):
        with torchtpu.precision("fast"):
            pass

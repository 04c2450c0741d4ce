"""torch.nn.functional activations and their gradients on the device against
the CPU, in every mode: float32 and 16-bit floats (computed in float32 and
rounded once, as the CPU), 0-d, empty, non-contiguous and NaN/Inf inputs,
out= and in-place forms, and no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

G = torch.Generator().manual_seed(0)
X = torch.randn(6, 34, generator=G) * 4
SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -3.0, 3.0, 20.0, -20.0])

ACTIVATIONS = {
    "elu": lambda t: F.elu(t, alpha=0.7),
    "celu": lambda t: F.celu(t, alpha=1.3),
    "selu": F.selu,
    "hardtanh": lambda t: F.hardtanh(t, -1.5, 2.25),
    "relu6": F.relu6,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "rrelu_eval": lambda t: F.rrelu(t, 0.1, 0.3, training=False),
    "softplus": lambda t: F.softplus(t, beta=2.0, threshold=5.0),
    "mish": F.mish,
    "hardshrink": lambda t: F.hardshrink(t, 0.75),
    "softshrink": lambda t: F.softshrink(t, 0.75),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "threshold": lambda t: F.threshold(t, 0.5, -2.0),
    "glu": lambda t: F.glu(t, -1),
    "logsigmoid": F.logsigmoid,
}
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 1e-3}


def check(fn, x, tol):
    expected = fn(x)
    got = fn(x.to("tpu")).cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_forward_and_gradient(name, dtype):
    fn = ACTIVATIONS[name]
    torchtpu.debug.reset_metrics()
    x = X.to(dtype)
    check(fn, x, TOL[dtype])
    check(fn, x.t(), TOL[dtype])  # non-contiguous
    if name != "glu":
        check(fn, SPECIAL.to(dtype), TOL[dtype])
        check(fn, torch.tensor(-0.5, dtype=dtype), TOL[dtype])  # 0-d
    check(fn, torch.empty(0, 4, dtype=dtype), TOL[dtype])
    xc = x.clone().requires_grad_()
    xd = x.to("tpu").requires_grad_()
    w = torch.randn(fn(x).shape, generator=G).to(dtype)
    (fn(xc) * w).sum().backward()
    (fn(xd) * w.to("tpu")).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=TOL[dtype], atol=TOL[dtype] * 4)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("name", ["elu", "leaky_relu", "hardtanh", "hardswish", "hardsigmoid", "softplus",
                                  "hardshrink", "threshold", "mish"])
def test_out_and_inplace(name):
    torchtpu.debug.reset_metrics()
    fn = {"elu": torch._C._nn.elu, "leaky_relu": torch._C._nn.leaky_relu, "hardtanh": torch._C._nn.hardtanh,
          "hardswish": torch._C._nn.hardswish, "hardsigmoid": torch._C._nn.hardsigmoid,
          "softplus": torch._C._nn.softplus, "hardshrink": torch.hardshrink,
          "threshold": lambda t, out=None: torch.threshold(t, 0.1, 7.0, out=out),
          "mish": torch._C._nn.mish}[name]
    out = torch.empty(0, device="tpu")
    r = fn(X.to("tpu"), out=out)
    assert r is out
    torch.testing.assert_close(out.cpu(), fn(X))
    inplace = {"elu": F.elu_, "leaky_relu": F.leaky_relu_, "hardtanh": F.hardtanh_,
               "hardswish": lambda t: F.hardswish(t, inplace=True),
               "hardsigmoid": lambda t: F.hardsigmoid(t, inplace=True),
               "mish": lambda t: F.mish(t, inplace=True), "threshold": lambda t: F.threshold_(t, 0.1, 7.0)}.get(name)
    if inplace is not None:
        xd = X.to("tpu")
        view = xd[:, 1:10]
        assert inplace(view) is view
        ref = X.clone()
        inplace(ref[:, 1:10])
        torch.testing.assert_close(xd.cpu(), ref)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_integer_inputs():
    torchtpu.debug.reset_metrics()
    i = torch.randint(-10, 10, (5, 7), generator=G)
    check(lambda t: F.hardtanh(t, -2.7, 3.9), i, 0)  # integer bounds truncate
    check(F.relu6, i.int(), 0)
    check(lambda t: F.threshold(t, 1.5, 100), i, 0)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        F.elu(i.to("tpu"))
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(i.bool().to("tpu"))


def test_prelu_and_rrelu():
    torchtpu.debug.reset_metrics()
    x = torch.randn(4, 3, 5, generator=G)
    w = torch.tensor([0.25, -0.5, 2.0])
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    xd, wd = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
    yc, yd = F.prelu(xc, wc), F.prelu(xd, wd)
    torch.testing.assert_close(yd.cpu(), yc)
    yc.sum().backward()
    yd.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)
    # Training: each non-positive element is scaled by its own slope in [lower, upper].
    xd = x.to("tpu").requires_grad_()
    y = F.rrelu(xd, 0.1, 0.3, training=True)
    y.sum().backward()
    yc, g = y.detach().cpu(), xd.grad.cpu()
    pos = x > 0
    assert torch.equal(yc[pos], x[pos]) and torch.equal(g[pos], torch.ones_like(g[pos]))
    slope = yc[~pos] / x[~pos]
    assert ((slope >= 0.1 - 1e-6) & (slope <= 0.3 + 1e-6)).all()
    torch.testing.assert_close(g[~pos], slope)
    assert slope.unique().numel() > 1
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_errors_name_the_op():
    x = X.to("tpu")
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(x[:, :33], 1)
    with pytest.raises(RuntimeError, match="glu does not support scalars"):
        F.glu(torch.tensor(1.0, device="tpu"))
    with pytest.raises(RuntimeError, match="lambda must be"):
        F.softshrink(x, -1.0)

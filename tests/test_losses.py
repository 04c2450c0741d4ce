"""torch.nn.functional losses (mse, huber, smooth_l1, binary_cross_entropy)
and group norm's backward on the device against the CPU, in every mode: each
reduction, float32 and 16-bit floats, NaN/Inf, empty, non-contiguous and
broadcast targets, gradients, the CPU's errors, and no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

G = torch.Generator().manual_seed(1)
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 1e-3}

LOSSES = {
    "mse": lambda a, b, r: F.mse_loss(a, b, reduction=r),
    "huber": lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=0.8),
    "smooth_l1": lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.6),
    "smooth_l1_beta0": lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.0),
    "bce": lambda a, b, r: F.binary_cross_entropy(torch.sigmoid(a), torch.sigmoid(b), reduction=r),
    "bce_weight": lambda a, b, r: F.binary_cross_entropy(torch.sigmoid(a), torch.sigmoid(b).round(),
                                                         weight=torch.linspace(0.5, 2, a.shape[-1]).to(a),
                                                         reduction=r),
}


def run(fn, a, b, r, device):
    a = a.detach().to(device).requires_grad_()
    loss = fn(a, b.to(device), r)
    (loss * torch.linspace(-1, 2, loss.numel()).reshape(loss.shape).to(loss)).sum().backward()
    return loss.detach().cpu(), a.grad.cpu()


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_loss_and_gradient(name, reduction, dtype):
    torchtpu.debug.reset_metrics()
    a = (torch.randn(5, 9, generator=G) * 2).to(dtype)
    b = (torch.randn(5, 9, generator=G) * 2).to(dtype)
    for x, y in ((a, b), (a.t(), b.t())):
        loss, grad = run(LOSSES[name], x, y, reduction, "cpu")
        dloss, dgrad = run(LOSSES[name], x, y, reduction, "tpu")
        tol = TOL[dtype] * (4 if reduction != "none" else 1)
        torch.testing.assert_close(dloss, loss, rtol=tol, atol=tol)
        torch.testing.assert_close(dgrad, grad, rtol=tol, atol=tol)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("name", ["mse", "huber", "smooth_l1"])
def test_nonfinite_empty_and_broadcast(name):
    torchtpu.debug.reset_metrics()
    fn = LOSSES[name]
    a = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0, 0.5, -0.25])
    b = torch.tensor([0.0, 1.0, -float("inf"), float("inf"), 0.5, 3.0])
    for r in ("none", "mean", "sum"):
        torch.testing.assert_close(fn(a.to("tpu"), b.to("tpu"), r).cpu(), fn(a, b, r), equal_nan=True)
        e = torch.empty(0, 3)
        torch.testing.assert_close(fn(e.to("tpu"), e.to("tpu"), r).cpu(), fn(e, e, r), equal_nan=True)
    x, y = torch.randn(4, 3, generator=G), torch.randn(3, generator=G)
    with pytest.warns(UserWarning):
        expected = fn(x, y, "mean")
    with pytest.warns(UserWarning):
        torch.testing.assert_close(fn(x.to("tpu"), y.to("tpu"), "mean").cpu(), expected)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_out_forms():
    torchtpu.debug.reset_metrics()
    a, b = torch.randn(3, 4, generator=G), torch.randn(3, 4, generator=G)
    for op, kw in ((torch._C._nn.mse_loss, {}), (torch._C._nn.huber_loss, {"delta": 0.5}),
                   (torch._C._nn.smooth_l1_loss, {"beta": 0.5})):
        out = torch.empty(0, device="tpu")
        assert op(a.to("tpu"), b.to("tpu"), 1, out=out, **kw) is out
        torch.testing.assert_close(out.cpu(), op(a, b, 1, **kw))
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_bce_clamps_log_and_rejects_bad_probabilities():
    torchtpu.debug.reset_metrics()
    p = torch.tensor([0.0, 1.0, 0.5, 1e-30, 1.0])
    t = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0])
    torch.testing.assert_close(F.binary_cross_entropy(p.to("tpu"), t.to("tpu"), reduction="none").cpu(),
                               F.binary_cross_entropy(p, t, reduction="none"))  # log clamped at -100
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    for bad in (torch.tensor([0.5, 1.5]), torch.tensor([float("nan"), 0.5])):
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
            F.binary_cross_entropy(bad.to("tpu"), torch.tensor([0.0, 1.0], device="tpu")).item()
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta"):
        F.huber_loss(p.to("tpu"), t.to("tpu"), delta=0.0)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta"):
        F.smooth_l1_loss(p.to("tpu"), t.to("tpu"), beta=-1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_backward(dtype, affine):
    torchtpu.debug.reset_metrics()
    x = (torch.randn(3, 6, 5, 2, generator=G) * 3 + 1).to(dtype)
    w = torch.randn(6, generator=G).to(dtype) if affine else None
    b = torch.randn(6, generator=G).to(dtype) if affine else None
    up = torch.randn(3, 6, 5, 2, generator=G).to(dtype)

    def grads(device):
        leaves = [t.detach().to(device).requires_grad_() for t in (x, w, b) if t is not None]
        y = F.group_norm(leaves[0], 3, *leaves[1:], eps=1e-3)
        (y * up.to(device)).sum().backward()
        return [t.grad.cpu() for t in leaves]

    tol = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 5e-3}[dtype]
    for got, expected in zip(grads("tpu"), grads("cpu")):
        torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    torchtpu.debug.reset_metrics()
    x = torch.randn(5, 4, generator=G)
    t = torch.tensor([0, 3, 1, 1, 2])
    w = torch.tensor([0.5, 1.0, 2.0, 0.25])
    for args in ((x, t), (x[0], t[:1]), (x[0], t[0])):
        for weight in (None, w):
            def fn(a, device):
                a = a.detach().to(device).requires_grad_()
                loss = F.multi_margin_loss(a, args[1].to(device), p=p, margin=0.7,
                                           weight=None if weight is None else weight.to(device), reduction=reduction)
                (loss * torch.linspace(-1, 2, loss.numel()).reshape(loss.shape).to(device)).sum().backward()
                return loss.detach().cpu(), a.grad.cpu()
            for got, expected in zip(fn(args[0], "tpu"), fn(args[0], "cpu")):
                torch.testing.assert_close(got, expected)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multi_margin_loss(x.to("tpu"), torch.tensor([0, 4, 1, 1, 2], device="tpu")).item()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    torchtpu.debug.reset_metrics()
    x = torch.randn(3, 5, generator=G)
    t = torch.tensor([[3, 0, -1, 1, 4], [1, 2, 3, 4, 0], [-1, 2, 0, 0, 0]])
    for a, b in ((x, t), (x[0], t[0])):
        def fn(device):
            xa = a.detach().to(device).requires_grad_()
            loss = F.multilabel_margin_loss(xa, b.to(device), reduction=reduction)
            (loss * torch.linspace(-1, 2, loss.numel()).reshape(loss.shape).to(device)).sum().backward()
            return loss.detach().cpu(), xa.grad.cpu()
        for got, expected in zip(fn("tpu"), fn("cpu")):
            torch.testing.assert_close(got, expected)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    for bad in ([[3, 0, -1, 7, 4]], [[-2, 0, 1, 1, 4]]):
        with pytest.raises(RuntimeError, match="'target' is out of range"):
            F.multilabel_margin_loss(x[:1].to("tpu"), torch.tensor(bad, device="tpu")).item()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_embedding_max_norm(norm_type):
    torchtpu.debug.reset_metrics()
    w = torch.randn(10, 4, generator=G) * 3
    idx = torch.tensor([[1, 2, 4], [4, 9, 1]])
    wd = w.to("tpu")
    got = F.embedding(idx.to("tpu"), wd, max_norm=1.5, norm_type=norm_type)
    expected = F.embedding(idx, w, max_norm=1.5, norm_type=norm_type)  # renormalizes w in place
    torch.testing.assert_close(got.cpu(), expected)
    torch.testing.assert_close(wd.cpu(), w)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_batch_norm_out_forms():
    torchtpu.debug.reset_metrics()
    x = torch.randn(4, 3, 5, generator=G)
    w, b = torch.randn(3, generator=G), torch.randn(3, generator=G)
    for training in (True, False):
        rm, rv = torch.zeros(3), torch.ones(3)
        rmd, rvd = rm.to("tpu"), rv.to("tpu")
        outs = [torch.empty(0, device="tpu") for _ in range(3)]
        r = torch.ops.aten.native_batch_norm.out(x.to("tpu"), w.to("tpu"), b.to("tpu"), rmd, rvd, training, 0.1,
                                                 1e-5, out=outs[0], save_mean=outs[1], save_invstd=outs[2])
        expected = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5)
        assert all(a is o for a, o in zip(r, outs))
        for got, e in zip(outs, expected):
            torch.testing.assert_close(got.cpu(), e)
        torch.testing.assert_close(rmd.cpu(), rm)
        torch.testing.assert_close(rvd.cpu(), rv)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_forward_and_backward(mode, padding_idx):
    """nn.functional.embedding_bag against the CPU: 1-D input with offsets (an empty bag included, with and
    without include_last_offset), 2-D input, per-sample weights (sum), padding_idx, NaN in a max bag, and the
    gradients of the weight and of the per-sample weights; no CPU fallback."""
    torchtpu.debug.reset_metrics()
    g = torch.Generator().manual_seed(0)
    w = torch.randn(10, 4, generator=g)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 2])
    offsets = torch.tensor([0, 3, 3, 7])
    psw = torch.rand(10, generator=g) if mode == "sum" else None
    cases = [dict(input=idx, offsets=offsets), dict(input=idx, offsets=torch.cat([offsets, torch.tensor([10])]),
                                                    include_last_offset=True),
             dict(input=idx.view(2, 5))]
    for kw in cases:
        def run(dev):
            wt = w.detach().clone().to(dev).requires_grad_()
            ps = psw.detach().clone().to(dev).requires_grad_() if psw is not None and kw["input"].dim() == 1 else None
            args = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
            out = torch.nn.functional.embedding_bag(weight=wt, mode=mode, padding_idx=padding_idx,
                                                    per_sample_weights=ps, **args)
            (out * torch.arange(out.numel(), dtype=out.dtype, device=dev).view(out.shape)).sum().backward()
            return [out, wt.grad] + ([ps.grad] if ps is not None else [])
        for got, want in zip(run("tpu"), run("cpu")):
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    if mode == "max":
        wn = w.clone()
        wn[4, 0] = float("nan")
        for first in (torch.tensor([4, 1, 5]), torch.tensor([1, 4, 5])):  # NaN first, NaN later
            out = torch.nn.functional.embedding_bag(first.to("tpu"), wn.to("tpu"), torch.tensor([0]).to("tpu"),
                                                    mode="max")
            torch.testing.assert_close(out.cpu(), torch.nn.functional.embedding_bag(first, wn, torch.tensor([0]),
                                                                                     mode="max"), equal_nan=True)
    bag = torch.nn.EmbeddingBag(10, 4, mode=mode)
    tb = torch.nn.EmbeddingBag(10, 4, mode=mode).to("tpu")
    tb.load_state_dict(bag.state_dict())
    torch.testing.assert_close(tb(idx.view(2, 5).to("tpu")).cpu(), bag(idx.view(2, 5)), rtol=1e-5, atol=1e-5)
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}
    with pytest.raises(IndexError):
        torch.nn.functional.embedding_bag(torch.tensor([11]).to("tpu"), w.to("tpu"), torch.tensor([0]).to("tpu"),
                                          mode=mode).cpu()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_every_target_ignored(reduction):
    """A mean over no rows is NaN, but the ignored rows' gradient is 0, as on
    the CPU (the backward's scale is then g / 0)."""
    x = torch.randn(3, 4, generator=G)
    for target in (torch.tensor([2, 2, 2]), torch.tensor([2, 0, 2])):
        results = []
        for dev in ("cpu", "tpu"):
            xx = x.clone().to(dev).requires_grad_()
            loss = F.cross_entropy(xx, target.to(dev), ignore_index=2, reduction=reduction)
            loss.backward(torch.full_like(loss, 0.7))
            results.append((loss.detach().cpu(), xx.grad.cpu()))
        torch.testing.assert_close(results[1][0], results[0][0], equal_nan=True)
        torch.testing.assert_close(results[1][1], results[0][1], equal_nan=True)

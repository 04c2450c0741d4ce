"""Convolution, batch norm and pooling on the device against the CPU: forward
values and the gradients of every input, running statistics, pooling indices,
and a small CNN trained a few steps. Every test runs in Debug, Strict and Fused
Eager, checks that the tpu lowering ran (op counters) and that nothing fell
back to the CPU."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torchtpu
from torchtpu.testing.models import SmallCNN, cnn_batch

pytestmark = pytest.mark.usefixtures("each_mode")

F64 = dict(rtol=1e-10, atol=1e-10)
F32 = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(autouse=True)
def _fresh_metrics():
    torchtpu.debug.reset_metrics()


def _assert_lowered(*ops):
    m = torchtpu.debug.metrics()
    assert m["cpu_fallbacks"] == {}, m["cpu_fallbacks"]
    for op in ops:
        assert m["ops"].get(op, 0) > 0, (op, sorted(m["ops"]))


def _compare(fn, *inputs, tol=F64, grad=True):
    """Runs fn on CPU and tpu copies of `inputs`, backpropagates the same
    random cotangent through the first output, and compares every output and
    every floating input's gradient."""
    def run(device):
        ins = [t.detach().to(device).requires_grad_(grad and t.is_floating_point()) for t in inputs]
        out = fn(*ins)
        outs = out if isinstance(out, tuple) else (out,)
        if grad:
            cot = torch.randn(outs[0].shape, generator=torch.Generator().manual_seed(0), dtype=outs[0].dtype)
            outs[0].backward(cot.to(device))
        return [o.detach().cpu() for o in outs], [t.grad.cpu() if t.grad is not None else None for t in ins]

    cpu_outs, cpu_grads = run("cpu")
    tpu_outs, tpu_grads = run("tpu")
    for i, (a, b) in enumerate(zip(tpu_outs, cpu_outs)):
        assert a.dtype == b.dtype and a.shape == b.shape, (i, a.dtype, b.dtype, a.shape, b.shape)
        torch.testing.assert_close(a, b, equal_nan=True, msg=lambda m: f"output {i}: {m}", **tol)
    for i, (a, b) in enumerate(zip(tpu_grads, cpu_grads)):
        assert (a is None) == (b is None), i
        if b is not None:
            torch.testing.assert_close(a, b, msg=lambda m: f"grad of input {i}: {m}", **tol)
    return tpu_outs


def _randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---- convolution --------------------------------------------------------------------------

CONV = {
    # name: (input shape, weight shape, keyword arguments)
    "2d_3x3_pad1": ((2, 3, 8, 8), (4, 3, 3, 3), dict(padding=1)),
    "2d_stride2": ((2, 3, 9, 8), (5, 3, 3, 3), dict(stride=2, padding=1)),
    "2d_dilation2": ((2, 3, 9, 9), (4, 3, 3, 3), dict(dilation=2, padding=2)),
    "2d_asymmetric": ((2, 3, 9, 7), (4, 3, 3, 2), dict(stride=(2, 1), padding=(0, 1), dilation=(1, 2))),
    "2d_groups2": ((2, 4, 9, 7), (6, 2, 3, 2), dict(stride=2, padding=1, dilation=(2, 1), groups=2)),
    "2d_depthwise": ((2, 4, 7, 7), (8, 1, 3, 3), dict(padding=1, groups=4)),
    "2d_1x1_pad2": ((2, 3, 5, 5), (4, 3, 1, 1), dict(padding=2)),
    "2d_kernel_eq_input": ((2, 3, 4, 4), (2, 3, 4, 4), dict()),
    "2d_same": ((2, 3, 6, 7), (4, 3, 3, 2), dict(padding="same", dilation=(1, 2))),
    "2d_unbatched": ((3, 6, 6), (4, 3, 3, 3), dict(padding=1)),
    "1d": ((2, 4, 11), (6, 2, 3), dict(stride=2, padding=2, groups=2)),
    "3d": ((2, 4, 5, 6, 5), (2, 4, 3, 1, 2), dict(stride=(1, 2, 1), padding=(1, 0, 1))),
}

CONV_T = {
    "2d_stride2_outpad1": ((2, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    "2d_groups_dilation": ((2, 4, 5, 6), (4, 2, 3, 3),
                           dict(stride=(2, 3), padding=(0, 2), output_padding=(1, 2), groups=2, dilation=(1, 2))),
    "1d": ((2, 3, 7), (3, 5, 4), dict(stride=3, padding=1)),
    "3d": ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), dict(stride=2, padding=(0, 1, 0), output_padding=(1, 0, 0))),
}


def _conv_fn(nsp, transposed):
    return {(1, False): F.conv1d, (2, False): F.conv2d, (3, False): F.conv3d,
            (1, True): F.conv_transpose1d, (2, True): F.conv_transpose2d, (3, True): F.conv_transpose3d}[nsp, transposed]


def _bias_size(w, kw, transposed):
    return w[1] * kw.get("groups", 1) if transposed else w[0]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("case", sorted(CONV))
def test_conv_forward_backward(case, bias):
    x_shape, w_shape, kw = CONV[case]
    fn = _conv_fn(len(w_shape) - 2, False)
    x, w, b = _randn(*x_shape, seed=1), _randn(*w_shape, seed=2), _randn(w_shape[0], seed=3)
    if bias:
        _compare(lambda x, w, b: fn(x, w, b, **kw), x, w, b)
    else:
        _compare(lambda x, w: fn(x, w, None, **kw), x, w)
    _assert_lowered("aten::convolution_overrideable", "aten::convolution_backward_overrideable")


@pytest.mark.parametrize("case", sorted(CONV_T))
def test_conv_transpose_forward_backward(case):
    x_shape, w_shape, kw = CONV_T[case]
    fn = _conv_fn(len(w_shape) - 2, True)
    b = _randn(_bias_size(w_shape, kw, True), seed=3)
    _compare(lambda x, w, b: fn(x, w, b, **kw), _randn(*x_shape, seed=1), _randn(*w_shape, seed=2), b)
    _assert_lowered("aten::convolution_overrideable", "aten::convolution_backward_overrideable")


def test_conv_float32_module():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = _randn(4, 3, 16, 16, dtype=torch.float32)
    _compare(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), x, conv.weight, conv.bias, tol=F32)
    _assert_lowered("aten::convolution_overrideable", "aten::convolution_backward_overrideable")


def test_conv_integer_forward():
    x = torch.randint(-3, 4, (2, 3, 6, 6), generator=torch.Generator().manual_seed(0))
    w = torch.randint(-3, 4, (4, 3, 3, 3), generator=torch.Generator().manual_seed(1))
    out = F.conv2d(x.to("tpu"), w.to("tpu"), stride=2, padding=1).cpu()
    assert out.dtype == torch.long
    assert torch.equal(out, F.conv2d(x, w, stride=2, padding=1))
    _assert_lowered("aten::convolution_overrideable")


def test_conv_bool_is_not_implemented():
    x = torch.ones(1, 1, 3, 3, dtype=torch.bool, device="tpu")
    with pytest.raises(NotImplementedError, match="convolution_overrideable.*Bool"):
        torch.ops.aten.convolution_overrideable(x, x, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


# ---- batch norm -------------------------------------------------------------------------------

def _bn_pair(cls, c, **kw):
    torch.manual_seed(0)
    m = cls(c, **kw).double()
    with torch.no_grad():
        if m.affine:
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
        if m.track_running_stats:
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    return m, copy.deepcopy(m).to("tpu")


def _bn_steps(cpu, tpu, shape, steps=3):
    for step in range(steps):
        x = _randn(*shape, seed=10 + step)
        y = cpu(x.requires_grad_())
        cot = _randn(*y.shape, seed=20 + step)
        y.backward(cot)
        xt = x.detach().to("tpu").requires_grad_()
        yt = tpu(xt)
        yt.backward(cot.to("tpu"))
        torch.testing.assert_close(yt.detach().cpu(), y.detach(), **F64)
        torch.testing.assert_close(xt.grad.cpu(), x.grad, **F64)
    for (name, a), b in zip(cpu.named_parameters(), tpu.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, msg=name, **F64)
    for (name, a), b in zip(cpu.named_buffers(), tpu.buffers()):
        torch.testing.assert_close(b.cpu(), a, msg=name, **F64)


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm2d_train_updates_running_stats(momentum, affine):
    cpu, tpu = _bn_pair(nn.BatchNorm2d, 3, momentum=momentum, affine=affine)
    before = tpu.running_mean.cpu().clone()
    _bn_steps(cpu, tpu, (4, 3, 5, 6))
    assert not torch.equal(tpu.running_mean.cpu(), before)
    assert tpu.num_batches_tracked.item() == 3
    _assert_lowered("aten::native_batch_norm", "aten::native_batch_norm_backward")


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm2d_eval_uses_running_stats(affine):
    cpu, tpu = _bn_pair(nn.BatchNorm2d, 3, affine=affine)
    cpu.eval()
    tpu.eval()
    stats = tpu.running_var.cpu().clone()
    _bn_steps(cpu, tpu, (4, 3, 5, 6))
    assert torch.equal(tpu.running_var.cpu(), stats)
    _assert_lowered("aten::native_batch_norm", "aten::native_batch_norm_backward")


def test_batch_norm_without_running_stats():
    cpu, tpu = _bn_pair(nn.BatchNorm2d, 3, track_running_stats=False)
    cpu.eval()
    tpu.eval()  # no running stats: batch statistics even in eval mode
    _bn_steps(cpu, tpu, (4, 3, 5, 6))
    _assert_lowered("aten::native_batch_norm", "aten::native_batch_norm_backward")


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm1d, (8, 5)), (nn.BatchNorm1d, (4, 5, 7)),
                                       (nn.BatchNorm3d, (2, 3, 4, 3, 5))], ids=["1d_nc", "1d_ncl", "3d"])
def test_batch_norm_other_ranks(cls, shape):
    cpu, tpu = _bn_pair(cls, shape[1])
    _bn_steps(cpu, tpu, shape)
    _assert_lowered("aten::native_batch_norm", "aten::native_batch_norm_backward")


def test_batch_norm_bfloat16_input_float_params():
    x = _randn(4, 3, 5, 5, dtype=torch.float32).bfloat16()
    w, b = _randn(3, dtype=torch.float32, seed=1), _randn(3, dtype=torch.float32, seed=2)
    rm, rv = torch.zeros(3), torch.ones(3)
    out = _compare(lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5) + (rm, rv),
                   x, w, b, rm, rv, tol=dict(rtol=2e-2, atol=2e-2), grad=False)
    assert [t.dtype for t in out] == [torch.bfloat16] + [torch.float32] * 4
    _assert_lowered("aten::native_batch_norm")


def test_batch_norm_decomposition_forms():
    """The forms decompositions and export produce: running stats updated in
    place, eval returns empty saved stats."""
    x, w, b = _randn(4, 3, 5), _randn(3, seed=1), _randn(3, seed=2)
    rm, rv = _randn(3, seed=3), torch.rand(3, generator=torch.Generator().manual_seed(4), dtype=torch.float64) + 0.5
    aten = torch.ops.aten
    forms = {
        "legit": lambda x, w, b, rm, rv: aten._native_batch_norm_legit(x, w, b, rm, rv, True, 0.1, 1e-5) + (rm, rv),
        "no_stats": lambda x, w, b, rm, rv: aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
        "no_training": lambda x, w, b, rm, rv: aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5),
        "with_update": lambda x, w, b, rm, rv: aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)[:3] + (rm, rv),
    }
    for name, f in forms.items():
        cpu = f(x, w, b, rm.clone(), rv.clone())
        tpu = f(*(t.to("tpu") for t in (x, w, b, rm.clone(), rv.clone())))
        for i, (a, c) in enumerate(zip(tpu, cpu)):
            assert a.shape == c.shape, (name, i)
            torch.testing.assert_close(a.cpu(), c, msg=f"{name} output {i}", **F64)
    _assert_lowered("aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit.no_stats",
                    "aten::_native_batch_norm_legit_no_training", "aten::_batch_norm_with_update")


def test_batch_norm_backward_form():
    x, g, w = _randn(4, 3, 5), _randn(4, 3, 5, seed=1), _randn(3, seed=2)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    aten = torch.ops.aten
    for update in (True, False):
        def f(x, g, w, rm, rv):
            _, mean, invstd, reserve = aten._batch_norm_with_update(x, w, None, rm, rv, 0.1, 1e-5) if update else \
                aten._batch_norm_no_update(x, w, None, rm, rv, 0.1, 1e-5)
            return aten.batch_norm_backward(g, x, w, rm, rv, mean, invstd, update, 1e-5, [True, True, True], reserve)
        cpu = f(x, g, w, rm.clone(), rv.clone())
        tpu = f(*(t.to("tpu") for t in (x, g, w, rm.clone(), rv.clone())))
        for i, (a, c) in enumerate(zip(tpu, cpu)):
            torch.testing.assert_close(a.cpu(), c, msg=f"update={update} output {i}", **F64)
    _assert_lowered("aten::batch_norm_backward", "aten::_batch_norm_no_update")


# ---- pooling ----------------------------------------------------------------------------------

MAX_POOL = {
    "k2": (2, None, 0, 1, False),
    "k3s2p1": (3, 2, 1, 1, False),
    "k3s2p1_ceil": (3, 2, 1, 1, True),
    "asym_dilated_ceil": ((3, 2), (2, 3), (1, 1), (2, 1), True),
    "k2s1": (2, 1, 0, 1, False),
}


def _max_pool(k, s, p, d, c):
    return lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=c, return_indices=True)


@pytest.mark.parametrize("case", sorted(MAX_POOL))
def test_max_pool2d_values_indices_grad(case):
    _compare(_max_pool(*MAX_POOL[case]), _randn(2, 3, 9, 8))
    _assert_lowered("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")


@pytest.mark.parametrize("case", ["k3s2p1", "k2s1"])
def test_max_pool2d_ties_pick_first_like_cpu(case):
    # Few distinct values: most windows hold their maximum more than once.
    x = torch.randint(0, 3, (2, 3, 9, 8), generator=torch.Generator().manual_seed(0)).double()
    _compare(_max_pool(*MAX_POOL[case]), x)
    _assert_lowered("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")


def test_max_pool2d_nan_and_inf():
    x = _randn(2, 3, 9, 8)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1] = float("-inf")
    x[1, 2, 4, 4:6] = float("inf")
    _compare(_max_pool(3, 2, 1, 1, False), x)
    _assert_lowered("aten::max_pool2d_with_indices")


def test_max_pool_unbatched_1d_3d_and_integer():
    _compare(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), _randn(3, 7, 6))
    _compare(lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True), _randn(2, 3, 11))
    _compare(lambda x: F.max_pool3d(x, 2, (1, 2, 2), 1, return_indices=True), _randn(2, 2, 5, 6, 7))
    xi = torch.randint(-100, 100, (2, 3, 7, 7), generator=torch.Generator().manual_seed(0))
    _compare(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), xi, grad=False)
    _assert_lowered("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
                    "aten::max_pool3d_with_indices", "aten::max_pool3d_with_indices_backward")


def test_max_pool_module_float32():
    _compare(nn.MaxPool2d(2), _randn(4, 16, 32, 32, dtype=torch.float32), tol=F32)
    _assert_lowered("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")


def test_max_pool_bad_padding_raises():
    x = torch.zeros(1, 1, 4, 4, device="tpu")
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(x, 2, 1, 2)


AVG_POOL = {
    "k2": dict(kernel_size=2),
    "k3s2p1": dict(kernel_size=3, stride=2, padding=1),
    "k3s2p1_nopad": dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    "k3s2p1_ceil": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "asym_ceil_nopad": dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True,
                            count_include_pad=False),
    "divisor": dict(kernel_size=3, stride=2, padding=1, divisor_override=5),
}


@pytest.mark.parametrize("case", sorted(AVG_POOL))
def test_avg_pool2d_values_grad(case):
    kw = AVG_POOL[case]
    _compare(lambda x: F.avg_pool2d(x, **kw), _randn(2, 3, 9, 8))
    _assert_lowered("aten::avg_pool2d", "aten::avg_pool2d_backward")


def test_avg_pool_1d_3d_and_float32():
    _compare(lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False), _randn(2, 3, 11))
    _compare(lambda x: F.avg_pool3d(x, 2, (1, 2, 2), 1, ceil_mode=True), _randn(2, 2, 5, 6, 7))
    _compare(nn.AvgPool2d(3, 2, 1), _randn(4, 8, 16, 16, dtype=torch.float32), tol=F32)
    _assert_lowered("aten::avg_pool2d", "aten::avg_pool2d_backward", "aten::avg_pool3d", "aten::avg_pool3d_backward")


@pytest.mark.parametrize("out", [(3, 4), (4, 3), (9, 8), (2, 1), (5, 7)],
                         ids=["divides", "uneven", "identity", "2x1", "uneven_5x7"])
def test_adaptive_avg_pool2d(out):
    _compare(lambda x: F.adaptive_avg_pool2d(x, out), _randn(2, 3, 9, 8))
    _assert_lowered("aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d_backward")


def test_adaptive_avg_pool_1d_3d_and_global():
    _compare(lambda x: F.adaptive_avg_pool1d(x, 4), _randn(2, 3, 11))
    _compare(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), _randn(2, 2, 5, 6, 7))
    _compare(nn.AdaptiveAvgPool2d(1), _randn(4, 8, 7, 7, dtype=torch.float32), tol=F32)
    _assert_lowered("aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d_backward")


# ---- a small CNN ------------------------------------------------------------------------------

def _train_cnn(model, device, steps):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, y = cnn_batch(16, gen)
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def test_small_cnn_trains_like_cpu():
    torch.manual_seed(0)
    model = SmallCNN()
    cpu_losses, cpu_model = _train_cnn(model, "cpu", 5)
    tpu_losses, tpu_model = _train_cnn(model, "tpu", 5)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    for (name, a), b in zip(cpu_model.state_dict().items(), tpu_model.state_dict().values()):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-4, atol=1e-5, msg=name)
    # Eval mode after training: running statistics, no batch statistics.
    x, _ = cnn_batch(8, torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(tpu_model.eval()(x.to("tpu")).cpu(), cpu_model.eval()(x), **F32)
    _assert_lowered("aten::convolution_overrideable", "aten::convolution_backward_overrideable",
                    "aten::native_batch_norm", "aten::native_batch_norm_backward",
                    "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")


def test_small_cnn_step_compiles_once():
    """A repeated CNN training step reuses its executables: after warm-up (in
    Fused Eager the loop detector needs a few steps) no step compiles."""
    torch.manual_seed(0)
    model = SmallCNN().to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for i in range(6):
        if i == 4:
            torchtpu.debug.reset_metrics()
        x, y = cnn_batch(8, gen)
        loss = F.cross_entropy(model(x.to("tpu")), y.to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    m = torchtpu.debug.metrics()
    assert m["compilations"] == 0, m["compilations"]
    assert m["executions"] > 0 and m["cache_hits"] == m["executions"]
    _assert_lowered("aten::convolution_backward_overrideable")

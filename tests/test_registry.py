"""The registration layer (csrc/aten/registry.{h,cpp}): one sorted table that
names every kernel and its family file; one wrapper that counts each call
under its overload name and checks devices; functional and in-place forms
derived from out= kernels, with PyTorch's semantics for each form."""
import os
import warnings

import pytest
import torch

import torchtpu
from torchtpu import _C, debug

DEV = torch.device("tpu")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matches_cpu(fn, inputs, rtol, atol):
    """fn on copies of `inputs` (None stays None) on the CPU and on the device:
    both raise (the device's exception a subclass of the CPU's), or both give
    the same result and leave the same first input (in-place forms)."""
    def run(dev):
        args = [t.clone().to(dev) if t is not None else None for t in inputs]
        try:
            r = fn(*args)
            return "ok", r.cpu() if isinstance(r, torch.Tensor) else r, args[0].cpu()
        except Exception as e:  # compared with the CPU's exception below
            return "raised", type(e), None

    expected, got = run("cpu"), run(DEV)
    torchtpu.synchronize()
    assert got[0] == expected[0], (got, expected)
    if expected[0] == "raised":
        assert issubclass(got[1], expected[1]), (got, expected)
        return
    for e, g in ((expected[1], got[1]), (expected[2], got[2])):
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        torch.testing.assert_close(g, e, equal_nan=True, rtol=rtol, atol=atol)


def test_table_is_sorted_and_names_every_kernel():
    table = _C._kernel_table()
    keys = [name.split(".")[0].rstrip("_") or name for name, _ in table]
    assert keys == sorted(keys)
    registered = {r[len("aten::"):] for r in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
                  if r.startswith("aten::")}
    assert {name for name, _ in table} == registered
    for name, family in table:
        assert os.path.exists(os.path.join(ROOT, "csrc", "aten", f"kernels_{family}.cpp")), (name, family)
        if name in ("add.Tensor", "mm", "index.Tensor"):
            assert torch._C._dispatch_dump(f"aten::{name}").count(f"kernels_{family}") == 0  # registered at runtime


@pytest.mark.parametrize("call, counted", [
    (lambda x, y, z, i: torch.add(x, y), "aten::add.Tensor"),
    (lambda x, y, z, i: x.add_(y), "aten::add_.Tensor"),
    (lambda x, y, z, i: torch.add(x, y, out=z), "aten::add.out"),
    (lambda x, y, z, i: torch.sin(x), "aten::sin"),
    (lambda x, y, z, i: x.sin_(), "aten::sin_"),
    (lambda x, y, z, i: torch.special.i1(x), "aten::special_i1"),
    (lambda x, y, z, i: torch.nn.functional.gelu(x), "aten::gelu"),
])
def test_each_call_counts_once_under_its_overload(call, counted):
    x, y, z = (torch.rand(4, device=DEV) for _ in range(3))
    i = torch.zeros(2, dtype=torch.long, device=DEV)
    torchtpu.synchronize()
    debug.reset_metrics()
    call(x, y, z, i)
    torchtpu.synchronize()
    assert debug.metrics()["ops"] == {counted: 1}


def test_a_derived_form_runs_as_one_device_op_in_place_and_donates_like_out():
    with torchtpu.eager_mode("strict"):
        x, y, z = (torch.rand(64, device=DEV) for _ in range(3))
        torchtpu.synchronize()
        for form in (lambda: torch.add(x, y), lambda: x.add_(y), lambda: torch.add(x, y, out=z)):
            debug.reset_metrics()
            form()
            torchtpu.synchronize()
            assert debug.metrics()["executions"] == 1


@pytest.mark.parametrize("fn", [
    lambda a, b, o: torch.add(a, b, out=o),
    lambda a, b, o: torch.atan2(a, b, out=o),
    lambda a, b, o: torch.sin(a, out=o),
    lambda a, b, o: torch.special.xlog1py(a, b, out=o),
    lambda a, b, o: torch.mm(a.view(2, 2), b.view(2, 2), out=o),
    lambda a, b, o: torch.cumsum(a, 0, out=o),
    lambda a, b, o: torch.clamp(a, b, b, out=o),
])
def test_an_out_tensor_on_another_device_is_refused(fn):
    a, b = torch.rand(4, device=DEV), torch.rand(4, device=DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        fn(a, b, torch.empty(4))
        torchtpu.synchronize()


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b,
    lambda a, b: a.mul_(b),
    lambda a, b: torch.mm(a.view(2, 2), b.view(2, 2)),
    lambda a, b: torch.where(a > 0, a, b),
    lambda a, b: torch.special.i1e(b) + a,
])
def test_a_cpu_operand_is_refused_unless_0d(fn):
    a = torch.rand(4, device=DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        fn(a, torch.rand(4))
        torchtpu.synchronize()
    torch.testing.assert_close((a + torch.tensor(2.0)).cpu(), a.cpu() + 2)


@pytest.mark.usefixtures("each_mode")
@pytest.mark.parametrize("case", [
    # (function, inputs): each runs on the CPU and the device
    (lambda a, b: a.add_(b), (torch.rand(3, 4), torch.rand(4))),
    (lambda a, b: a.add_(b), (torch.rand(4), torch.rand(3, 4))),                # cannot broadcast in place
    (lambda a, b: a.mul_(b), (torch.arange(4), torch.rand(4))),                 # float into long
    (lambda a, b: a.div_(b), (torch.rand(2, 3), torch.rand(3))),
    (lambda a, b: a.atan2_(b), (torch.rand(4).t(), torch.rand(4))),
    (lambda a, b: a.fmod_(2.5), (torch.rand(3, 2).t(), None)),
    (lambda a, b: a.eq_(b), (torch.rand(4), torch.rand(4))),
    (lambda a, b: a.logical_and_(b), (torch.rand(4) > 0.5, torch.rand(4) > 0.5)),
    (lambda a, b: a.sqrt_(), (torch.rand(2, 3)[:, 1], None)),
    (lambda a, b: a.exp_(), (torch.arange(4), None)),                           # float result into long
    (lambda a, b: a.neg_(), (torch.empty(0, 3), None)),
    (lambda a, b: a.abs_(), (torch.tensor(-2.5), None)),
    (lambda a, b: a.nan_to_num_(posinf=1.0), (torch.tensor([float("inf"), float("nan"), 1.0]), None)),
    (lambda a, b: a.round_(decimals=1), (torch.rand(5) * 10, None)),
    (lambda a, b: a.logit_(1e-3), (torch.rand(5), None)),
    (lambda a, b: a.xlogy_(b), (torch.rand(5), torch.rand(5))),
    (lambda a, b: a.addcmul_(b, b, value=2), (torch.rand(2, 3), torch.rand(3))),
    (lambda a, b: torch.pow(a, 2.0), (torch.arange(-3, 3), None)),
    (lambda a, b: a.pow_(2.0), (torch.rand(4), None)),
    (lambda a, b: torch.signbit(a), (torch.tensor([-0.0, 0.0, -1.0, float("nan")]), None)),
    (lambda a, b: torch.polygamma(2, a), (torch.rand(4) + 0.5, None)),
    (lambda a, b: torch.maximum(a, b), (torch.arange(4), torch.rand(4))),
    (lambda a, b: torch.eq(a, b), (torch.arange(4), torch.tensor(2))),
    (lambda a, b: torch.remainder(a, -1.5), (torch.rand(4) * 5 - 2, None)),
    (lambda a, b: torch.logical_not(a), (torch.arange(3), None)),
])
def test_derived_forms_match_the_cpu(case):
    fn, inputs = case
    matches_cpu(fn, inputs, rtol=1e-5, atol=1e-6)


def test_out_form_resizes_an_empty_out_and_warns_on_a_wrong_shape_like_the_cpu():
    for dev in ("cpu", DEV):
        a = torch.rand(2, 3, device=dev)
        out = torch.empty(0, device=dev)
        torch.sin(a, out=out)
        assert out.shape == (2, 3)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = torch.empty(5, device=dev)
            torch.sin(a, out=out)
        assert out.shape == (2, 3) and any("resized" in str(x.message) for x in w), dev


F = torch.nn.functional


@pytest.mark.usefixtures("each_mode")
@pytest.mark.parametrize("fn, make", [
    # forms derived from out= kernels across the families
    (lambda a: torch.softmax(a, -1), lambda: torch.randn(3, 5)),
    (lambda a: torch.log_softmax(a.t(), 0), lambda: torch.randn(3, 5)),
    (lambda a: F.pad(a, (2, 1), mode="reflect"), lambda: torch.randn(2, 3, 6)),
    (lambda a: torch.nansum(a, 1), lambda: torch.tensor([[1.0, float("nan")], [2.0, 3.0]])),
    (lambda a: torch.prod(a, 0, dtype=torch.float64), lambda: torch.randn(3, 4)),
    (lambda a: torch.count_nonzero(a, 1), lambda: torch.tensor([[0, 1, 2], [0, 0, 3]])),
    (lambda a: a.scatter_(1, torch.tensor([[0], [2]], device=a.device), 7.0), lambda: torch.zeros(2, 3)),
    (lambda a: torch.take(a, torch.tensor([0, -1], device=a.device)), lambda: torch.randn(2, 3)),
    (lambda a: torch.index_select(a, 1, torch.tensor([2, 0], device=a.device)), lambda: torch.randn(2, 3)),
    (lambda a: torch.mm(a, a.t()), lambda: torch.randn(3, 4)),
    (lambda a: a.t().contiguous().addmm_(a.t(), a[:, :3]), lambda: torch.randn(3, 3)),
    (lambda a: a.triu_(1), lambda: torch.randn(3, 4)),
    (lambda a: torch.cat([a, a], 1), lambda: torch.randn(2, 2)),
    (lambda a: torch.sum(a, (0, 1), keepdim=True), lambda: torch.arange(6).view(2, 3)),
    (lambda a: torch.mean(a, 0), lambda: torch.randn(3, 2)),
    (lambda a: torch.mean(a, 0), lambda: torch.arange(6).view(3, 2)),                # integer mean refused
    (lambda a: torch.amax(a, 1), lambda: torch.randn(3, 2)),
    (lambda a: torch.argmax(a, 1), lambda: torch.randn(3, 2)),
    (lambda a: torch.any(a, 1), lambda: torch.tensor([[0, 1], [0, 0]], dtype=torch.uint8)),
    (lambda a: torch.all(a), lambda: torch.tensor([[True, False]])),
    (lambda a: torch.var(a, 1, correction=0), lambda: torch.randn(3, 4)),
    (lambda a: torch.std(a), lambda: torch.randn(5)),
    (lambda a: a.renorm_(2, 0, 1.0), lambda: torch.randn(3, 4) * 3),
    (lambda a: torch.logcumsumexp(a, 0), lambda: torch.randn(4)),
    (lambda a: torch.isin(a, torch.tensor([1, 3], device=a.device)), lambda: torch.arange(5)),
    (lambda a: torch.nonzero(a), lambda: torch.tensor([[0, 1], [2, 0]])),
    (lambda a: torch.masked_select(a, a > 0), lambda: torch.randn(3, 3)),
    (lambda a: torch.baddbmm(a, a, a), lambda: torch.randn(2, 3, 3)),
    (lambda a: torch.addmv(a[0], a, a[1]), lambda: torch.randn(3, 3)),
    (lambda a: torch.linalg.cross(a, a.flip(0)), lambda: torch.randn(3, 3)),
    (lambda a: torch.narrow_copy(a, 1, 1, 2), lambda: torch.randn(2, 4)),
    (lambda a: F.avg_pool2d(a, 2), lambda: torch.randn(1, 2, 4, 4)),
    (lambda a: F.interpolate(a, scale_factor=2, mode="bilinear"), lambda: torch.randn(1, 1, 3, 3)),
    (lambda a: F.hardtanh_(a, -0.5, 0.5), lambda: torch.randn(4)),
    (lambda a: F.gelu(a), lambda: torch.arange(3)),                                 # integer gelu refused
    (lambda a: torch.clamp_(a, min=-0.1, max=0.2), lambda: torch.randn(5)),
    (lambda a: torch.where(a > 0, a, 0.0), lambda: torch.randn(5)),
    (lambda a: F.huber_loss(a, a.flip(0)), lambda: torch.randn(5)),
    (lambda a: F.binary_cross_entropy(a, a.flip(0)), lambda: torch.rand(5)),
    (lambda a: F.layer_norm(a, (4,)), lambda: torch.randn(3, 4)),
    (lambda a: F.batch_norm(a, None, None, training=True), lambda: torch.randn(4, 3, 2)),
    (lambda a: F.group_norm(a, 2), lambda: torch.randn(2, 4, 3)),
])
def test_derived_forms_of_every_family_match_the_cpu(fn, make):
    matches_cpu(fn, (make(),), rtol=1e-4, atol=1e-5)

"""Foreach ops (torch._foreach_*) run as one device op per call
(csrc/aten/kernels_foreach.cpp): PyTorch's per-tensor loop builds one graph,
so a call is one program in Strict Eager and one fused op in Fused Eager.
Results, aliasing, partial updates and errors are those of the per-tensor
ops, checked against the CPU in every mode."""
import pytest
import torch

import torchtpu
from torchtpu import debug

DEV = torch.device("tpu")


def lists(shapes, dtype=torch.float32, seed=0, lo=0.5, hi=2.0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(s, generator=g) * (hi - lo) + lo).to(dtype) for s in shapes]


SHAPES = [(3, 4), (5,), (), (0, 3), (2, 3, 2)]


def to_dev(x):
    if isinstance(x, torch.Tensor):
        return x.to(DEV)
    if isinstance(x, list) and x and isinstance(x[0], torch.Tensor):
        return [t.to(DEV) for t in x]
    return x


CASES = {
    "add_scalar": lambda a, b, c: torch._foreach_add_(a, 1.5),
    "add_list_alpha": lambda a, b, c: torch._foreach_add_(a, b, alpha=-0.5),
    "add_scalarlist": lambda a, b, c: torch._foreach_add_(a, [0.5, -1.0, 2.0, 3.0, 4.0]),
    "add_tensor": lambda a, b, c: torch._foreach_add_(a, torch.tensor(2.0), alpha=3),
    "mul_scalar": lambda a, b, c: torch._foreach_mul_(a, 0.999),
    "mul_tensor": lambda a, b, c: torch._foreach_mul_(a, c),
    "div_list": lambda a, b, c: torch._foreach_div_(a, b),
    "sub_functional": lambda a, b, c: torch._foreach_sub(a, b),
    "lerp_scalar": lambda a, b, c: torch._foreach_lerp_(a, b, 0.1),
    "lerp_list": lambda a, b, c: torch._foreach_lerp_(a, b, b),
    "addcmul_scalar": lambda a, b, c: torch._foreach_addcmul_(a, b, b, value=0.01),
    "addcdiv_scalarlist": lambda a, b, c: torch._foreach_addcdiv_(a, b, b, [-0.1, 0.2, 0.3, 0.4, 0.5]),
    "sqrt": lambda a, b, c: torch._foreach_sqrt(a),
    "neg_inplace": lambda a, b, c: torch._foreach_neg_(a),
    "exp": lambda a, b, c: torch._foreach_exp(a),
    "norm": lambda a, b, c: torch._foreach_norm(a, 2),
    "norm_inf": lambda a, b, c: torch._foreach_norm(a, float("inf")),
    "pow_scalar": lambda a, b, c: torch._foreach_pow(a, 2.5),
    "pow_list": lambda a, b, c: torch._foreach_pow(a, b),
    "clamp_min": lambda a, b, c: torch._foreach_clamp_min_(a, 1.0),
    "maximum": lambda a, b, c: torch._foreach_maximum(a, b),
    "zero": lambda a, b, c: torch._foreach_zero_(a),
    "copy": lambda a, b, c: torch._foreach_copy_(a, b),
    "sign": lambda a, b, c: torch._foreach_sign(a),
}


def run(case, device, dtype=torch.float32, shapes=SHAPES):
    a = [t.to(device) for t in lists(shapes, dtype, 0)]
    b = [t.to(device) for t in lists(shapes, dtype, 1)]
    c = torch.tensor(0.5, dtype=dtype, device=device)
    try:
        r = CASES[case](a, b, c)
    except RuntimeError as e:  # compared with the CPU's below
        return type(e), [t.cpu() for t in a]
    return [t.cpu() for t in a], None if r is None else [t.cpu() for t in r]


def same(got, want):
    if isinstance(want[0], type):
        assert isinstance(got[0], type) and issubclass(got[0], want[0]), (got, want)
        torch.testing.assert_close(got[1], want[1], equal_nan=True)
    else:
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_cpu(case, each_mode):
    same(run(case, DEV), run(case, "cpu"))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_reduced_and_double_precision(dtype, each_mode):
    for case in ("addcdiv_scalarlist", "lerp_scalar", "norm", "mul_tensor"):
        same(run(case, DEV, dtype), run(case, "cpu", dtype))


def test_integer_lists_promote_as_the_per_tensor_ops(each_mode):
    for dev in ("cpu", DEV):
        a = [torch.arange(6).reshape(2, 3).to(dev), torch.tensor(7, device=dev)]
        out = torch._foreach_div(a, 2)
        assert [t.dtype for t in out] == [torch.float32, torch.float32]
        res = out if dev == "cpu" else [t.cpu() for t in out]
        if dev == "cpu":
            want = res
        else:
            torch.testing.assert_close(res, want)


def test_aliases_and_views_see_earlier_updates(each_mode):
    """The same tensor twice, and two views of one storage: each per-tensor
    op sees the writes of the ones before it, as PyTorch's loop does."""
    def go(dev):
        x = torch.arange(12, dtype=torch.float32, device=dev).reshape(3, 4)
        y = torch.ones(3, 4, device=dev)
        torch._foreach_add_([x, x, x[:, 1], x.t()[2]], [y, y, y[:, 0], x[:, 0]])
        return x.cpu()
    torch.testing.assert_close(go(DEV), go("cpu"))


def test_nan_and_inf_pass_through(each_mode):
    def go(dev):
        a = [torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], device=dev), torch.zeros(2, device=dev)]
        return [t.cpu() for t in torch._foreach_div(a, [0.0, 0.0])] + [t.cpu() for t in torch._foreach_sqrt(a)]
    torch.testing.assert_close(go(DEV), go("cpu"), equal_nan=True)


def test_one_program_in_strict_and_one_fused_op():
    a = [t.to(DEV) for t in lists([(8, 8)] * 20)]
    b = [t.to(DEV) for t in lists([(8, 8)] * 20, seed=1)]
    with torchtpu.eager_mode("strict"):
        torch._foreach_addcdiv_(a, b, b, value=0.1)
        torchtpu.synchronize()
        debug.reset_metrics()
        torch._foreach_addcdiv_(a, b, b, value=0.2)
        torchtpu.synchronize()
        m = debug.metrics()
        assert m["executions"] == 1 and m["ops"]["aten::addcdiv_"] == 20
    with torchtpu.eager_mode("fused"):
        debug.reset_metrics()
        torch._foreach_mul_(a, 0.5)
        torch._foreach_add_(a, b)
        torchtpu.synchronize()
        assert debug.metrics()["fused_ops"] == 2


@pytest.mark.parametrize("bad", ["length", "shape"])
def test_errors_and_partial_updates_as_the_cpu(bad, each_mode):
    """A failing element raises the per-tensor op's error after the elements
    before it were updated, on the device as on the CPU."""
    def go(dev):
        a = [torch.ones(3, device=dev), torch.ones(2, device=dev), torch.ones(3, device=dev)]
        b = [torch.ones(3, device=dev), torch.ones(2, device=dev), torch.ones(3, device=dev)]
        if bad == "length":
            b = b[:2]
        elif bad == "shape":
            b[1] = torch.ones(4, device=dev)
        with pytest.raises(RuntimeError) as e:
            torch._foreach_add_(a, b)
        return [t.cpu() for t in a], e.type
    (ga, ge), (ca, ce) = go(DEV), go("cpu")
    assert issubclass(ge, ce)
    torch.testing.assert_close(ga, ca)


def test_a_cpu_tensor_in_a_list_is_refused_as_by_the_per_tensor_op(each_mode):
    a = [torch.ones(3, device=DEV), torch.ones(2, device=DEV)]
    with pytest.raises(RuntimeError, match="same device"):
        torch._foreach_add_(a, [torch.ones(3, device=DEV), torch.ones(2)])
    torch.testing.assert_close([t.cpu() for t in a], [torch.full((3,), 2.0), torch.ones(2)])


def test_a_host_copy_inside_the_loop_runs_op_by_op(each_mode):
    """Copying CPU numbers into device tensors uploads inside PyTorch's loop:
    the batch gives way and the ops run one by one, with the same results;
    device-only copies still batch."""
    def go(dev):
        a = [torch.zeros((), device=dev), torch.zeros((), device=dev, dtype=torch.float64)]
        torch._foreach_copy_(a, [torch.tensor(1.5), torch.tensor(-2, dtype=torch.int32)])
        # The same tensor from the device and then from the host: the host's value is last.
        torch._foreach_copy_([a[0], a[0]], [torch.full((), 3.0, device=dev), torch.tensor(4.0)])
        b = [torch.ones(3, device=dev), torch.ones(2, device=dev)]
        torch._foreach_copy_(b, [torch.arange(3.0, device=dev), torch.full((2,), 7.0, device=dev)])
        return [t.cpu() for t in a + b]
    torch.testing.assert_close(go(DEV), go("cpu"))
    with torchtpu.eager_mode("strict"):
        b = [torch.ones(3, device=DEV), torch.ones(2, device=DEV)]
        src = [torch.arange(3.0, device=DEV), torch.full((2,), 7.0, device=DEV)]
        torchtpu.synchronize()
        debug.reset_metrics()
        torch._foreach_copy_(b, src)
        torchtpu.synchronize()
        assert debug.metrics()["executions"] == 1


def test_autograd_through_foreach(each_mode):
    def go(dev):
        xs = [t.to(dev).requires_grad_() for t in lists([(3, 2), (4,)])]
        ys = torch._foreach_mul(xs, 3.0)
        zs = torch._foreach_exp(ys)
        sum(z.sum() for z in zs).backward()
        return [x.grad.cpu() for x in xs]
    torch.testing.assert_close(go(DEV), go("cpu"))


@pytest.mark.parametrize("opt", ["adamw", "sgd", "adam_amsgrad"])
def test_foreach_optimizers_match_the_cpu(opt, each_mode):
    def go(dev):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2)).to(dev)
        make = {"adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
                "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True, foreach=True),
                "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, weight_decay=0.1,
                                                            foreach=True)}[opt]
        o = make(model.parameters())
        sched = torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.7)
        g = torch.Generator().manual_seed(1)
        for _ in range(4):
            x = torch.randn(6, 5, generator=g).to(dev)
            loss = model(x).square().mean()
            o.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=True)
            o.step()
            sched.step()
        return [p.detach().cpu() for p in model.parameters()]
    torch.testing.assert_close(go(DEV), go("cpu"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda a: torch.addcdiv(a, a, a + 1),
    lambda a: torch.lerp(a, a, 0.5),
    lambda a: torch.lerp(a, a, a),
    lambda a: torch._foreach_addcdiv([a], [a], [a + 1]),
    lambda a: torch._foreach_lerp([a], [a], 0.5),
])
def test_integer_addcdiv_and_lerp_are_refused_as_on_the_cpu(call, each_mode):
    for dev in ("cpu", DEV):
        with pytest.raises((RuntimeError, NotImplementedError)) as e:
            call(torch.arange(4, device=dev))
        if dev == "cpu":
            want = (e.type, str(e.value).splitlines()[0][:40])
    assert (e.type, str(e.value).splitlines()[0][:40]) == want

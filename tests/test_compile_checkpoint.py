"""torch.compile(backend="tpu") with activation checkpointing, in every eager
mode: selective checkpointing (a policy function, a list of ops, a policy
that saves everything) and full non-reentrant checkpointing, around a
compiled block and inside a compiled function, with gradients compared to
plain eager on the CPU; every call of a compiled program shows dispatch
modes no op its capture did not; compiled functions that return views of
their inputs and of intermediates return the values, layouts and aliasing
of eager PyTorch."""
import collections
import functools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class AttentionBlock(nn.Module):
    """A pre-norm transformer block with scaled dot-product attention."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(x)))


def save_matmuls_and_attention(ctx, op, *args, **kwargs):
    if op in (aten.mm.default, aten.addmm.default, aten.bmm.default) or op.__name__.startswith(
            "_scaled_dot_product"):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def save_everything(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE


POLICIES = {
    "function": save_matmuls_and_attention,
    "list": [aten.mm.default, aten.addmm.default],
    "everything": save_everything,
}


def checkpoint_kwargs(policy):
    if policy == "full":
        return {"use_reentrant": False}
    return {"use_reentrant": False,
            "context_fn": functools.partial(create_selective_checkpoint_contexts, POLICIES[policy])}


def train(device, policy, where, compile_it, steps=3):
    """Outputs and gradients of `steps` forward and backward passes of a
    checkpointed block (the gradients accumulate over the steps)."""
    torch.manual_seed(0)
    model = AttentionBlock().to(device)
    kwargs = checkpoint_kwargs(policy)
    if where == "around":  # checkpoint(compiled block)
        block = torch.compile(model, backend="tpu") if compile_it else model
        step = lambda x: checkpoint(block, x, **kwargs)  # noqa: E731
    else:  # compiled(checkpoint(block))
        step = lambda x: checkpoint(model, x, **kwargs)  # noqa: E731
        step = torch.compile(step, backend="tpu") if compile_it else step
    gen = torch.Generator().manual_seed(1)
    results = []
    for _ in range(steps):
        x = torch.randn(2, 6, 16, generator=gen).to(device).requires_grad_()
        y = step(x)
        (y.square().sum() + y.sum()).backward()
        results += [y.detach().cpu(), x.grad.cpu()]
    return results + [p.grad.cpu() for p in model.parameters()]


def assert_all_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy", ["function", "list", "everything"])
def test_selective_checkpoint_around_a_compiled_block(policy):
    got = train(torchtpu.get_device(), policy, "around", compile_it=True)
    assert_all_close(got, train("cpu", policy, "around", compile_it=False))


@pytest.mark.parametrize("policy", ["function", "list"])
def test_selective_checkpoint_inside_a_compiled_function(policy):
    got = train(torchtpu.get_device(), policy, "inside", compile_it=True)
    assert_all_close(got, train("cpu", policy, "inside", compile_it=False))


@pytest.mark.parametrize("where", ["around", "inside"])
def test_full_non_reentrant_checkpoint(where):
    got = train(torchtpu.get_device(), "full", where, compile_it=True)
    assert_all_close(got, train("cpu", "full", where, compile_it=False))


def test_selective_checkpoint_around_a_block_with_dynamic_shapes():
    def run(device, compile_it):
        torch.manual_seed(0)
        model = AttentionBlock().to(device)
        block = torch.compile(model, backend="tpu", dynamic=True) if compile_it else model
        kwargs = checkpoint_kwargs("function")
        out = []
        for t in (4, 6):
            x = torch.randn(2, t, 16, generator=torch.Generator().manual_seed(t)).to(device).requires_grad_()
            y = checkpoint(block, x, **kwargs)
            y.square().sum().backward()
            out += [y.detach().cpu(), x.grad.cpu()]
        return out + [p.grad.cpu() for p in model.parameters()]

    assert_all_close(run(torchtpu.get_device(), True), run("cpu", False))


class OpCounter(TorchDispatchMode):
    """Counts the ATen ops dispatched while it is active."""

    @classmethod
    def ignore_compile_internals(cls):
        return True

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func] += 1
        return func(*args, **(kwargs or {}))


def test_program_calls_show_dispatch_modes_no_op_the_capture_did_not():
    # Selective checkpointing pairs the ops of a forward (here the capture)
    # with those of its recomputation (a run of the program).
    def f(x, w):
        y = x @ w
        return y.relu(), w.t(), x.transpose(0, 1), y.view(-1), torch.empty(0, 3, device=x.device)

    cf = torch.compile(f, backend="tpu")
    x, w = torch.randn(4, 3).to("tpu"), torch.randn(3, 5).to("tpu")
    calls = []
    for _ in range(3):
        with OpCounter() as counter:
            cf(x, w)
        calls.append(counter.ops)
    capture, first_run, second_run = calls
    assert first_run == second_run
    assert not (first_run - capture), f"ops the capture did not dispatch: {dict(first_run - capture)}"
    assert aten.as_strided.default not in first_run


def views(x, w):
    y = x @ w
    head, tail = y.split(y.shape[0] // 2, dim=0)
    return x.transpose(0, 1), x[1:], y.view(-1), head, tail, y.t(), x.view(torch.int32), x[:, 1:].view(torch.int16), y


@pytest.mark.filterwarnings("ignore:torchtpu. the program issued from this line")  # reading back many shapes
@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_views_of_inputs_and_intermediates(dynamic):
    cf = torch.compile(views, backend="tpu", dynamic=dynamic)
    for call in range(3):  # the capture, then runs of the program (new shapes when dynamic)
        rows = 4 + (2 * call if dynamic else 0)
        gen = torch.Generator().manual_seed(call)
        x_cpu, w_cpu = torch.randn(rows, 3, generator=gen), torch.randn(3, 5, generator=gen)
        x, w = x_cpu.to("tpu"), w_cpu.to("tpu")
        got, want = cf(x, w), views(x_cpu, w_cpu)
        for g, e in zip(got, want):
            assert (g.shape, g.stride(), g.storage_offset(), g.dtype) == (e.shape, e.stride(), e.storage_offset(),
                                                                          e.dtype)
            torch.testing.assert_close(g.cpu(), e)
        # Writes through a returned view land where eager's do: in the input
        # and in every other view of the same intermediate.
        got[0].add_(1)
        want[0].add_(1)
        got[2].mul_(2)
        want[2].mul_(2)
        got[4][0].zero_()
        want[4][0].zero_()
        torch.testing.assert_close(x.cpu(), x_cpu)
        for g, e in zip(got, want):
            torch.testing.assert_close(g.cpu(), e)
        assert got[0]._base is x or got[0]._base is x._base

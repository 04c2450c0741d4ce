"""JAX and Pallas kernels on tpu tensors (torchtpu.pallas): values against
the same function run by JAX itself on the host, gradients (JAX's vjp, or a
given backward) against PyTorch's, in every mode; the kernel fuses with the
ops around it (Fused Eager, torch.compile) and keeps 64-bit dtypes; bad
arguments raise naming the kernel."""
import collections

import numpy as np
import pytest
import torch

import torchtpu
from torchtpu import debug

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install -r requirements-jax.txt)")
jnp = jax.numpy
pytestmark = pytest.mark.usefixtures("each_mode")


def host(fn, *tensors):
    """`fn` run by JAX on the host, on the tensors' values, as torch tensors."""
    def arr(t):
        if t.dtype == torch.bfloat16:
            return jnp.asarray(t.float().numpy()).astype(jnp.bfloat16)
        return jnp.asarray(t.numpy())

    with jax.enable_x64(any(t.dtype in (torch.int64, torch.float64) for t in tensors)):
        out = jax.jit(fn)(*[arr(t) for t in tensors])
        return jax.tree_util.tree_map(lambda a: torch.from_numpy(np.asarray(a.astype(jnp.float32) if a.dtype ==
                                                                            jnp.bfloat16 else a).copy()), out)


def gelu_mul(x, y):
    return jax.nn.gelu(x, approximate=False) * y + jnp.mean(y)


K_GELU = torchtpu.pallas.custom_jax_kernel(gelu_mul)


@pytest.mark.parametrize("shape", [(3, 4), (), (0, 5), (2, 3, 8)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_values_against_jax(shape, dtype):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)
    got = K_GELU(a.to("tpu"), b.to("tpu"))
    want = host(gelu_mul, a, b)
    assert got.dtype == dtype and got.shape == a.shape
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-6
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol, equal_nan=True)


def test_nonfinite_and_noncontiguous():
    a = torch.tensor([[0.0, float("nan")], [float("inf"), -1.0]]).t()  # non-contiguous
    b = torch.ones(2, 2)
    got = K_GELU(a.to("tpu"), b.to("tpu"))
    torch.testing.assert_close(got.cpu(), host(gelu_mul, a.contiguous(), b), equal_nan=True)


Pair = collections.namedtuple("Pair", "doubled count")


@torchtpu.jax_kernel
def structured(x, i):
    return {"pair": Pair(x * 2, (i > 0).sum()), "big": i * 3 + 1, "flags": x > 0}


def test_pytree_outputs_and_64_bit_ints():
    x = torch.randn(5)
    i = torch.tensor([2**60, -7, 3, 0, 2**53 + 1])
    got = structured(x.to("tpu"), i.to("tpu"))
    want = host(structured.fn, x, i)
    assert isinstance(got["pair"], Pair)
    assert got["big"].dtype == torch.int64 and got["flags"].dtype == torch.bool
    assert torch.equal(got["big"].cpu(), i * 3 + 1) and torch.equal(got["big"].cpu(), want["big"])
    assert got["pair"].count.item() == 3
    torch.testing.assert_close(got["pair"].doubled.cpu(), x * 2)
    assert torch.equal(got["flags"].cpu(), x > 0)


def test_gradients_by_vjp():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    x, y = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    (K_GELU(x, y) * torch.arange(12.0).view(4, 3).to("tpu")).sum().backward()
    xr, yr = a.clone().requires_grad_(), b.clone().requires_grad_()
    ((torch.nn.functional.gelu(xr) * yr + yr.mean()) * torch.arange(12.0).view(4, 3)).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y.grad.cpu(), yr.grad, rtol=1e-5, atol=1e-5)


def test_integer_inputs_get_no_grad():
    @torchtpu.jax_kernel
    def scale_rows(x, idx):
        return x[idx] * 2.0

    x = torch.randn(4, 3).to("tpu").requires_grad_()
    idx = torch.tensor([2, 0, 2]).to("tpu")
    scale_rows(x, idx).sum().backward()
    want = torch.zeros(4, 3)
    want[0] += 2
    want[2] += 4
    torch.testing.assert_close(x.grad.cpu(), want)


def test_given_backward():
    calls = []

    def backward(x, grad):
        calls.append(grad.shape)
        return grad * 10.0  # deliberately not the true gradient

    k = torchtpu.pallas.custom_jax_kernel(lambda x: x * x, backward=backward)
    x = torch.tensor([1.0, 2.0]).to("tpu").requires_grad_()
    k(x).sum().backward()
    assert calls == [torch.Size([2])]
    torch.testing.assert_close(x.grad.cpu(), torch.tensor([10.0, 10.0]))


def test_pallas_kernel():
    from jax.experimental import pallas as pl

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * y_ref[...] + 1.0

    @torchtpu.pallas.custom_jax_kernel
    def fma(x, y):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=torchtpu.pallas.interpret())(x, y)

    a, b = torch.randn(8, 128), torch.randn(8, 128)
    torch.testing.assert_close(fma(a.to("tpu"), b.to("tpu")).cpu(), a * b + 1.0)


def test_fuses_with_surrounding_ops(each_mode):
    a, b = torch.randn(6, 6).to("tpu"), torch.randn(6, 6).to("tpu")
    torchtpu.synchronize()
    debug.reset_metrics()
    out = (K_GELU(a * 2, b) + 1).sum()
    value = out.item()
    executions = debug.metrics()["executions"]
    if each_mode == "fused":
        assert executions == 1
    else:
        assert executions == 4  # a * 2, the kernel, + 1, sum: one program each
    assert debug.metrics()["cpu_fallbacks"] == {}
    assert value == pytest.approx(float((host(gelu_mul, a.cpu() * 2, b.cpu()) + 1).sum()), rel=1e-5)


def test_torch_compile_one_program():
    def model(x, y):
        return K_GELU(torch.relu(x), y).sum(dim=0)

    torch._dynamo.reset()
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    debug.reset_metrics()
    got = torch.compile(model, backend="tpu")(a.to("tpu"), b.to("tpu"))
    assert debug.metrics()["compiled"]["programs"] == 1
    torch.testing.assert_close(got.cpu(), host(gelu_mul, torch.relu(a), b).sum(0), rtol=1e-5, atol=1e-5)
    assert "func.call" in debug.stablehlo(model, a.to("tpu"), b.to("tpu"))


def test_repeat_calls_hit_the_cache():
    a = torch.randn(7, 2).to("tpu")
    K_GELU(a, a).cpu()
    before = debug.metrics()["compilations"]
    for _ in range(3):
        K_GELU(a, a).cpu()
    assert debug.metrics()["compilations"] == before


def test_errors_name_the_kernel():
    with pytest.raises(TypeError, match="gelu_mul.*argument 1 is a float"):
        K_GELU(torch.ones(2).to("tpu"), 2.0)
    with pytest.raises(RuntimeError, match="gelu_mul.*argument 0 is on cpu"):
        K_GELU(torch.ones(2), torch.ones(2).to("tpu"))
    with pytest.raises(RuntimeError, match=r"gelu_mul.*exporting for inputs"):
        K_GELU(torch.ones(2).to("tpu"), torch.ones(3).to("tpu"))  # shapes do not broadcast in JAX
    with pytest.raises(TypeError, match="unsupported input dtype"):
        K_GELU(torch.ones(2, dtype=torch.uint32).to("tpu"), torch.ones(2, dtype=torch.uint32).to("tpu"))


def test_outputs_of_no_input():
    k = torchtpu.jax_kernel(lambda x: jnp.arange(3.0) * 2)
    got = k(torch.ones(4).to("tpu"))
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), torch.tensor([0.0, 2.0, 4.0]))  # JAX's default float32
    wide = k(torch.ones(4, dtype=torch.float64).to("tpu"))  # a 64-bit input: x64 mode
    torch.testing.assert_close(wide.cpu(), torch.tensor([0.0, 2.0, 4.0], dtype=torch.float64))

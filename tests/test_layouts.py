"""Elementwise results are laid out as PyTorch's TensorIterator lays them out
on the CPU: a transposed, permuted or channels-last input gives a result in
its dimension order (the first input with an opinion decides), so `.stride()`,
`.is_contiguous()` and the `.view()` calls that depend on them behave as on
the CPU. Every case is checked against the CPU: values and strides."""
import random

import pytest
import torch

import torchtpu  # noqa: F401

pytestmark = pytest.mark.usefixtures("each_mode")


def _laid_out(shape, order, dtype=torch.float32, seed=0, step=1):
    """A tensor of `shape` whose memory runs in `order` (outermost first),
    every `step`-th element of its storage."""
    g = torch.Generator().manual_seed(seed)
    phys = [shape[d] for d in order]
    if step > 1 and phys:
        phys[-1] *= step
    if dtype == torch.bool:
        t = torch.rand(phys, generator=g) > 0.5
    else:
        t = (torch.randn(phys, generator=g) * 3).to(dtype)
    if step > 1 and phys:
        t = t[..., ::step]
    inverse = [order.index(d) for d in range(len(shape))]
    return t.permute(inverse)


def _same_as_cpu(fn, *inputs):
    want = fn(*inputs)
    got = fn(*[x.to("tpu") if isinstance(x, torch.Tensor) else x for x in inputs])
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, equal_nan=True)
        if w.numel() == 0:
            continue  # an empty result's strides depend on which fast path the CPU took
        # Strides of size-1 dims are free on the CPU too (its fast path and
        # its general path set them differently); every other one must match.
        ws = [s for s, n in zip(w.stride(), w.shape) if n != 1]
        gs = [s for s, n in zip(g.stride(), g.shape) if n != 1]
        assert gs == ws, f"strides {g.stride()} vs the CPU's {w.stride()} for shape {tuple(w.shape)}"
        assert g.is_contiguous() == w.is_contiguous()


OPS = {
    "add": lambda a, b: a + b,
    "mul_scalar": lambda a, b: a * 2.5,
    "rsub_broadcast_first": lambda a, b: b[..., :1] - a,
    "where": lambda a, b: torch.where(a > 0, a, b),
    "clamp": lambda a, b: a.clamp(-1, 1),
    "exp": lambda a, b: a.exp(),
    "gt": lambda a, b: a > b,
    "relu": lambda a, b: torch.relu(a),
    "gelu": lambda a, b: torch.nn.functional.gelu(a),
    "pow": lambda a, b: a.abs().pow(b),
    "lerp": lambda a, b: torch.lerp(a, b, 0.3),
    "to_double": lambda a, b: a.to(torch.float64),
    "mse_none": lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="none"),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_elementwise_results_follow_their_inputs_layout(op):
    rng = random.Random(op)
    for case in range(12):
        nd = rng.randint(2, 4)
        shape = [rng.choice([1, 2, 3, 5]) for _ in range(nd)]
        if case == 11:
            shape[rng.randrange(nd)] = 0
        order_a = rng.sample(range(nd), nd)
        order_b = rng.sample(range(nd), nd)
        a = _laid_out(shape, order_a, seed=case, step=1 + (case % 3 == 2))
        # b: the same shape, or broadcast from fewer dims / size-1 dims.
        b_shape = list(shape)
        if case % 4 == 1:
            b_shape = b_shape[1:]
        elif case % 4 == 3:
            b_shape[rng.randrange(nd)] = 1
        b = _laid_out(b_shape, rng.sample(range(len(b_shape)), len(b_shape)), seed=case + 100)
        _same_as_cpu(OPS[op], a, b)


def test_channels_last_stays_channels_last():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    y = torch.randn(2, 3, 4, 5)
    _same_as_cpu(lambda a, b: torch.sigmoid(a) * b, x, y)  # the first operand decides
    _same_as_cpu(lambda a, b: b * torch.sigmoid(a), x, y)
    got = torch.sigmoid(x.to("tpu"))
    assert got.is_contiguous(memory_format=torch.channels_last)


def test_a_view_of_a_transposed_result_works_as_on_the_cpu():
    # (x.t() * 2) is laid out like x.t(), so its .t() is contiguous and views.
    x = torch.randn(6, 4)

    def f(x):
        y = x.t() * 2
        return y.t().view(-1), y.view(4, 6) if y.is_contiguous() else y.t().reshape(24)

    _same_as_cpu(f, x)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        (x.to("tpu").t() * 2).view(-1)  # as on the CPU


def test_writes_into_permuted_memory():
    # A whole transposed tensor, and a transposed block inside a larger
    # storage, written by copy_ and by an in-place op.
    def f(buf, src):
        whole = torch.empty(5, 3).t()
        whole.copy_(src)
        block = buf[2:17].view(5, 3).t()
        block.copy_(src * 2)
        block.add_(1)
        return whole, buf

    _same_as_cpu(f, torch.zeros(20), torch.randn(3, 5))


def test_autograd_through_permuted_layouts_matches_the_cpu():
    w = torch.randn(4, 6)

    def f(w):
        w = w.clone().requires_grad_()
        h = torch.tanh(w.t() @ w)  # contiguous
        z = (torch.relu(w.t()) * torch.sigmoid(w.t())).sum(1) + h.sum(1)
        z.sum().backward()
        return z.detach(), w.grad

    _same_as_cpu(f, w)


def test_sort_and_flip_keep_their_inputs_layout():
    x = _laid_out([3, 4, 5], [0, 2, 1], seed=3)
    _same_as_cpu(lambda a: torch.sort(a, dim=1), x)
    _same_as_cpu(lambda a: torch.flip(a, [0, 2]), x)
    _same_as_cpu(lambda a: torch.sort(a, dim=-1).values.transpose(1, 2).view(-1), x)


def test_compiled_graph_with_views_of_permuted_results():
    # AOTAutograd emits `view` where PyTorch's strides allow it. Elementwise
    # results match those strides; a result laid out otherwise here (the
    # CPU's Cholesky factor is column-major) still runs, its view taken as a
    # reshape.
    def f(a, c, m):
        s = a.transpose(1, 2) * c.transpose(1, 2)
        spd = m @ m.mT + 3 * torch.eye(3, device=m.device)
        t = torch.linalg.cholesky(spd).mT.view(-1)
        return (s.transpose(1, 2).view(2, -1) @ c[0].reshape(-1, 1)).squeeze(1), t

    a, c, m = torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(3, 3)
    want = f(a, c, m)
    torch._dynamo.reset()
    got = torch.compile(f, backend="tpu")(a.to("tpu"), c.to("tpu"), m.to("tpu"))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w)
    torch._dynamo.reset()


def _spd(n=4, batch=(2,), seed=0):
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(*batch, n, n, generator=g)
    return m @ m.mT + n * torch.eye(n)


LINALG = {
    "cholesky": lambda a, b: torch.linalg.cholesky(a),
    "cholesky_ex": lambda a, b: torch.linalg.cholesky_ex(a),
    "inv": lambda a, b: torch.linalg.inv(a),
    "solve": lambda a, b: torch.linalg.solve(a, b),
    "solve_triangular": lambda a, b: torch.linalg.solve_triangular(torch.linalg.cholesky(a), b, upper=False),
    "cholesky_solve": lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a)),
    "lu_factor": lambda a, b: torch.linalg.lu_factor(a),
    "lu_solve": lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
    "lu_solve_right": lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False),
    "solve_right": lambda a, b: torch.linalg.solve(a, b.mT, left=False),
    "qr": lambda a, b: torch.linalg.qr(b),
    "qr_complete": lambda a, b: torch.linalg.qr(b, mode="complete"),
    "eigh": lambda a, b: torch.linalg.eigh(a),
    "svd": lambda a, b: torch.linalg.svd(b, full_matrices=False),
    "lstsq": lambda a, b: torch.linalg.lstsq(a, b).solution,
    "householder_product": lambda a, b: torch.linalg.householder_product(*torch.geqrf(b)),
    "lu": lambda a, b: torch.linalg.lu(b),  # P, L and U are row-major on the CPU
    "det": lambda a, b: torch.linalg.det(a),
}


@pytest.mark.parametrize("op", sorted(LINALG))
def test_linalg_results_are_laid_out_as_lapack_returns_them(op):
    # Batched column-major matrices (the CPU's and CUDA's layout), so
    # `.mT.view(...)` of a factor works as there; vectors stay row-major.
    a, b = _spd(), torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(1))
    fn = LINALG[op]
    want = fn(a, b)
    got = fn(a.to("tpu"), b.to("tpu"))
    want = tuple(want) if isinstance(want, tuple) else (want,)
    got = tuple(got) if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.stride() == w.stride(), f"{tuple(g.shape)}: {g.stride()} vs {w.stride()}"
        if op not in ("qr", "qr_complete", "svd", "eigh", "householder_product"):  # signs are free there
            torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)


def test_a_view_of_a_transposed_factor_works_as_on_the_cpu():
    a = _spd(batch=())

    def f(a):
        return torch.linalg.cholesky(a).mT.reshape(-1), torch.linalg.inv(a).mT.view(-1)

    want = f(a)
    got = f(a.to("tpu"))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)


def test_a_resized_out_takes_the_results_layout():
    # As PyTorch's structured out= ops: an out of another shape is resized
    # and restrided; one of the right shape keeps its strides.
    a = _spd()
    for make in (lambda d: torch.empty(0, device=d), lambda d: torch.empty(2, 4, 4, device=d)):
        want, got = make("cpu"), make("tpu")
        torch.linalg.cholesky(a, out=want)
        torch.linalg.cholesky(a.to("tpu"), out=got)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.bfloat16, torch.float16,
                                   torch.float64])
def test_layouts_for_every_dtype_with_0d_operands(dtype):
    # Values survive the transposed write exactly (int64 beyond 2**53, NaN
    # and Inf), and a 0-d tensor operand has no say in the layout.
    if dtype == torch.int64:
        x = torch.arange(12, dtype=torch.int64).reshape(3, 4) + 2**53 + 1
    elif dtype == torch.int32:
        x = torch.arange(12, dtype=torch.int32).reshape(3, 4) - 6
    elif dtype == torch.bool:
        x = torch.arange(12).reshape(3, 4) % 3 == 0
    else:
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(5)).to(dtype)
        x[0, 1], x[2, 2], x[1, 3] = float("nan"), float("inf"), float("-inf")
    zero_d = torch.tensor(True) if dtype == torch.bool else torch.tensor(3, dtype=dtype)
    _same_as_cpu(lambda a, s: a.t() + s, x, zero_d)
    _same_as_cpu(lambda a, s: torch.where(a.t() == a.t(), a.t(), s), x, zero_d)
    _same_as_cpu(lambda a, s: (s * a.t()).t().reshape(-1), x, zero_d)

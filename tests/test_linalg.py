"""torch.linalg on the device against the CPU, in every mode: triangular
solves, the Cholesky family (info and errors included), LU with LAPACK's
pivots, solve, inv, det and slogdet, LDL^T with LAPACK's Bunch-Kaufman
pivots; batched, broadcast, empty and
non-contiguous inputs, float64, gradients, dtypes the CPU refuses, and no CPU
fallback for the lowered ops (large matrices fall back on purpose)."""
import subprocess
import sys
import warnings

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

G = torch.Generator().manual_seed(0)


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=G, dtype=dtype)


def spd(*shape, dtype=torch.float32):
    a = rand(*shape, dtype=dtype)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def tri(*shape, upper=False):
    a = rand(*shape)
    a = a.triu() if upper else a.tril()
    return a + 3 * torch.eye(shape[-1]) * torch.sign(a.diagonal(dim1=-2, dim2=-1)).unsqueeze(-1)


def same(fn, *args, tol=1e-4):
    expected = fn(*args)
    got = fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    for g, e in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected)):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        torch.testing.assert_close(g, e, equal_nan=True, rtol=tol, atol=tol)


def no_fallbacks():
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit):
    torchtpu.debug.reset_metrics()
    a = tri(2, 4, 4, upper=upper)
    b = rand(2, 4, 3) if left else rand(2, 3, 4)
    same(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit), a, b)
    # broadcast batch dims, non-contiguous B
    same(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit),
         a[0], (rand(3, 5, 4) if left else rand(3, 4, 5)).mT)
    no_fallbacks()


def test_triangular_solve_and_out():
    torchtpu.debug.reset_metrics()
    a, b = tri(3, 4, 4, upper=True), rand(1, 4, 2)
    for transpose in (False, True):
        same(lambda b, a: torch.triangular_solve(b, a, upper=True, transpose=transpose), b, a)
    out = torch.empty(0, device="tpu")
    r = torch.linalg.solve_triangular(a.to("tpu"), b.to("tpu"), upper=True, out=out)
    assert r is out
    torch.testing.assert_close(out.cpu(), torch.linalg.solve_triangular(a, b, upper=True), rtol=1e-4, atol=1e-4)
    same(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), torch.empty(0, 0), torch.empty(0, 3))
    no_fallbacks()


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_family(upper):
    torchtpu.debug.reset_metrics()
    a = spd(2, 3, 5, 5)
    same(lambda a: torch.linalg.cholesky(a, upper=upper), a)
    same(lambda a: torch.linalg.cholesky_ex(a, upper=upper), a)
    same(lambda a: torch.linalg.cholesky(a, upper=upper), a.mT)  # non-contiguous
    same(lambda a: torch.linalg.cholesky(a), spd(4, 4, dtype=torch.float64), tol=1e-10)
    same(lambda a: torch.cholesky(a, upper=upper), a[0, 0])
    l = torch.linalg.cholesky(a, upper=upper)
    same(lambda b, l: torch.cholesky_solve(b, l, upper=upper), rand(3, 5, 2), l)
    same(lambda l: torch.cholesky_inverse(l, upper=upper), l[0, 0])
    same(lambda a: torch.linalg.cholesky(a), torch.empty(0, 3, 3))
    no_fallbacks()


def test_cholesky_info_and_errors():
    torchtpu.debug.reset_metrics()
    bad = spd(3, 4, 4)
    bad[1, 2, 2] = -100.0  # the third leading minor is not positive definite
    got = torch.linalg.cholesky_ex(bad.to("tpu")).info.cpu()
    assert got.tolist() == torch.linalg.cholesky_ex(bad).info.tolist() == [0, 3, 0]
    failed = [torch.linalg.cholesky_ex(m, upper=up).L for m in (bad, bad.to("tpu")) for up in (False, True)]
    torch.testing.assert_close(failed[2].cpu(), failed[0])  # LAPACK's partial factor, the input after it
    torch.testing.assert_close(failed[3].cpu(), failed[1])
    nan = spd(4, 4)
    nan[0, 0] = float("nan")
    assert torch.linalg.cholesky_ex(nan.to("tpu")).info.item() == torch.linalg.cholesky_ex(nan).info.item() == 1
    with pytest.raises(torch.linalg.LinAlgError, match=r"Batch element 1\).*order 3"):
        torch.linalg.cholesky(bad.to("tpu"))
    with pytest.raises(torch.linalg.LinAlgError, match="order 3"):
        torch.cholesky(bad[1].to("tpu"))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.cholesky_inverse(torch.diag(torch.tensor([1.0, 0.0, 2.0])).to("tpu"))
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.cholesky(rand(3, 4).to("tpu"))
    with pytest.raises(NotImplementedError, match="Half"):
        torch.linalg.cholesky(spd(3, 3).half().to("tpu"))
    no_fallbacks()


@pytest.mark.parametrize("shape", [(5, 5), (2, 4, 4), (6, 3), (3, 6), (0, 0), (2, 0, 3)])
def test_lu_matches_lapack_pivots(shape):
    torchtpu.debug.reset_metrics()
    a = rand(*shape)
    same(lambda a: torch.linalg.lu_factor_ex(a), a)
    same(lambda a: torch.linalg.lu(a), a)
    lu, piv = torch.linalg.lu_factor(a) if a.numel() and shape[-1] == shape[-2] else (None, None)
    if lu is not None:
        same(lambda lu, piv: torch.lu_unpack(lu, piv), lu, piv)
    no_fallbacks()


def test_lu_ties_zero_pivots_and_nan():
    torchtpu.debug.reset_metrics()
    ties = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 5.0, 1.0], [1.0, 1.0, 0.0]])  # |a| ties: LAPACK keeps the first
    same(lambda a: torch.linalg.lu_factor_ex(a), ties)
    singular = torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 6.0]])
    same(lambda a: torch.linalg.lu_factor_ex(a), singular)  # info 1, column left unscaled
    same(lambda a: torch.linalg.det(a), singular)
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        torch.linalg.inv(singular.to("tpu"))
    no_fallbacks()


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(left, adjoint):
    torchtpu.debug.reset_metrics()
    a = rand(2, 4, 4)
    lu, piv = torch.linalg.lu_factor(a)
    b = rand(2, 4, 3) if left else rand(2, 3, 4)
    same(lambda lu, piv, b: torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint), lu, piv, b)
    no_fallbacks()


def test_solve_inv_det_slogdet():
    torchtpu.debug.reset_metrics()
    a = rand(3, 4, 4)
    same(lambda a, b: torch.linalg.solve(a, b), a, rand(3, 4, 2))
    same(lambda a, b: torch.linalg.solve(a, b), a, rand(3, 4))  # vector right-hand side
    same(lambda a, b: torch.linalg.solve(a, b, left=False), a, rand(3, 2, 4))
    same(lambda a: torch.linalg.inv(a), a)
    same(lambda a: torch.linalg.inv(a), a.mT)
    same(lambda a: torch.linalg.det(a), a)
    same(lambda a: torch.linalg.slogdet(a), a)
    same(lambda a: torch.logdet(a), spd(3, 4, 4))
    same(lambda a: torch.linalg.matrix_power(a, -2), a, tol=1e-3)
    same(lambda a: torch.linalg.det(a), torch.empty(2, 0, 0))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported"):
        torch.linalg.inv(a.half().to("tpu"))
    no_fallbacks()


def test_gradients():
    torchtpu.debug.reset_metrics()
    a, v = rand(3, 3), rand(3)
    x, y = a.clone().requires_grad_(), v.clone().requires_grad_()
    xd, yd = a.to("tpu").requires_grad_(), v.to("tpu").requires_grad_()
    torch.linalg.solve(x, y).sum().backward()
    torch.linalg.solve(xd, yd).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(yd.grad.cpu(), y.grad, rtol=1e-4, atol=1e-4)
    for fn in (torch.linalg.det, torch.linalg.inv, lambda m: torch.linalg.cholesky(m @ m.mT + 3 * torch.eye(3,
               device=m.device))):
        x = a.clone().requires_grad_()
        xd = a.to("tpu").requires_grad_()
        fn(x).sum().backward()
        fn(xd).sum().backward()
        torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)


def test_large_matrices_fall_back_to_the_cpu():
    torchtpu.debug.reset_metrics()
    a = spd(70, 70)
    same(lambda a: torch.linalg.cholesky(a), a, tol=1e-3)
    assert "aten::linalg_cholesky_ex" in torchtpu.debug.metrics()["cpu_fallbacks"]


def sym(*shape, dtype=torch.float32):
    a = rand(*shape, dtype=dtype)
    return a + a.mT  # indefinite: 1x1 and 2x2 pivots, interchanges


def same_ldl(A, tol):
    """LD close to the CPU's, pivots and info equal (the same pivot choices)."""
    got, ref = torch.linalg.ldl_factor_ex(A.to("tpu")), torch.linalg.ldl_factor_ex(A)
    assert torch.equal(got.pivots.cpu(), ref.pivots) and torch.equal(got.info.cpu(), ref.info), \
        (got.pivots.cpu(), ref.pivots, got.info.cpu(), ref.info)
    assert got.LD.stride() == ref.LD.stride() and got.pivots.dtype == torch.int32
    torch.testing.assert_close(got.LD.cpu(), ref.LD, rtol=tol, atol=tol)
    return got, ref


@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (2, 2, 6, 6), (1, 1), (13, 13), (70, 70),
                                   (0, 0), (2, 0, 0), (0, 3, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ldl_factor_and_solve_match_lapack(shape, dtype):
    torchtpu.debug.reset_metrics()
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    A = sym(*shape, dtype=dtype)
    got, ref = same_ldl(A, tol)
    B = rand(*shape[:-1], 3, dtype=dtype)
    x = torch.linalg.ldl_solve(got.LD, got.pivots, B.to("tpu"))
    torch.testing.assert_close(x.cpu(), torch.linalg.ldl_solve(ref.LD, ref.pivots, B), rtol=tol, atol=tol)
    no_fallbacks()


def test_ldl_two_by_two_pivots_singular_and_lower_triangle_only():
    torchtpu.debug.reset_metrics()
    A = sym(6, 6, dtype=torch.float64)
    A.diagonal().zero_()  # every pivot a 2x2 block or an interchange
    got, _ = same_ldl(A, 1e-10)
    assert (got.pivots.cpu() < 0).any()
    same_ldl(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 1e-6)
    S = sym(5, 5)
    S[2].zero_()
    S[:, 2].zero_()
    got, _ = same_ldl(S, 1e-4)  # a zero column: info names it, the rest goes on
    assert got.info.item() > 0
    same_ldl(torch.zeros(3, 3), 0)
    same_ldl(sym(5, 5).tril(), 1e-4)  # only the lower triangle is read
    same_ldl(sym(4, 7, 7, dtype=torch.float64).mT[1::2], 1e-10)  # non-contiguous
    with pytest.raises(Exception) as cpu:
        torch.linalg.ldl_factor_ex(torch.zeros(2, 2), check_errors=True)
    with pytest.raises(type(cpu.value), match=str(cpu.value)[:40]):
        torch.linalg.ldl_factor_ex(torch.zeros(2, 2, device="tpu"), check_errors=True)
    no_fallbacks()


def test_ldl_solve_broadcasts_and_out():
    torchtpu.debug.reset_metrics()
    ld, piv = torch.linalg.ldl_factor(sym(3, 4, 4, dtype=torch.float64))
    B = rand(2, 1, 4, 2, dtype=torch.float64)
    x = torch.linalg.ldl_solve(ld.to("tpu"), piv.to("tpu"), B.to("tpu"), hermitian=True)
    # The CPU's kernel reads past broadcast batches (it crashes), so its reference takes them expanded.
    ref = torch.linalg.ldl_solve(ld.expand(2, 3, 4, 4).contiguous(), piv.expand(2, 3, 4).contiguous(),
                                 B.expand(2, 3, 4, 2).contiguous())
    torch.testing.assert_close(x.cpu(), ref)
    out = torch.empty(0, dtype=torch.float64, device="tpu")
    torch.linalg.ldl_solve(ld[0].to("tpu"), piv[0].to("tpu"), B[0, 0].mT.to("tpu").mT, out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.ldl_solve(ld[0], piv[0], B[0, 0]))
    assert out.stride() == (1, 4)
    outs = [torch.empty(0, device="tpu", dtype=d) for d in (torch.float64, torch.int32, torch.int32)]
    torch.linalg.ldl_factor_ex(ld[0].to("tpu") + 0, out=tuple(outs))
    assert torch.equal(outs[1].cpu(), torch.linalg.ldl_factor_ex(ld[0]).pivots)
    for dev in ("cpu", "tpu"):  # an out= of another dtype is refused alike
        with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float"):
            torch.linalg.ldl_solve(ld[0].to(dev), piv[0].to(dev), B[0, 0].to(dev), out=torch.empty(0, device=dev))
    no_fallbacks()
    with pytest.raises(NotImplementedError) as cpu:
        torch.linalg.ldl_factor(torch.eye(2, dtype=torch.bfloat16))
    with pytest.raises(NotImplementedError, match=str(cpu.value)[:30]):
        torch.linalg.ldl_factor(torch.eye(2, dtype=torch.bfloat16, device="tpu"))


def test_complex_ldl_runs_on_the_cpu_fallback():
    a = torch.randn(4, 4, generator=G, dtype=torch.complex64)
    a = a + a.mT
    torchtpu.debug.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned once per process
        got = torch.linalg.ldl_factor(a.to("tpu"), hermitian=False)
    ref = torch.linalg.ldl_factor(a)
    torch.testing.assert_close(got.LD.cpu(), ref.LD)
    assert torch.equal(got.pivots.cpu(), ref.pivots)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {"aten::linalg_ldl_factor_ex": 1}
    torchtpu.debug.reset_metrics()

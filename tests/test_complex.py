"""Complex tensors on tpu (complex64 and complex128) against the CPU:
storage and copies, PyTorch's lazy conjugate, views between complex values
and their (re, im) pairs, elementwise ops and reductions, matmul, the FFT
family, autograd through them (a rotary embedding as llama's), and a clear
refusal for kernels without a complex lowering."""
import io
import warnings

import pytest
import torch

import torchtpu

dev = "tpu"
CDTYPES = [torch.complex64, torch.complex128]


def crand(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(*shape, 2, generator=g, dtype=torch.float64)
    return torch.view_as_complex(real).to(dtype)


def close(got, want, **kw):
    assert got.device.type == "tpu"
    tol = {} if want.dtype in (torch.complex128, torch.float64) else dict(rtol=2e-5, atol=2e-5)
    tol.update(kw)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", CDTYPES, ids=str)
def test_storage_copies_and_printing(dtype):
    a = crand(3, 4, dtype=dtype)
    t = a.to(dev)
    assert t.dtype == dtype and torch.equal(t.cpu(), a)
    close(t.t().contiguous(), a.t().contiguous())  # a non-contiguous read
    close(t[:, 1::2], a[:, 1::2])
    close(torch.zeros(2, 3, dtype=dtype, device=dev), torch.zeros(2, 3, dtype=dtype))
    close(torch.full((2,), 1 - 2j, dtype=dtype, device=dev), torch.full((2,), 1 - 2j, dtype=dtype))
    z = torch.zeros(3, dtype=dtype, device=dev)
    z[1] = 2 + 3j
    assert z.cpu().tolist() == [0j, 2 + 3j, 0j]
    assert (t[0, 0].item() - a[0, 0].item()) == 0
    assert "j" in repr(t) and "device='tpu:0'" in repr(t)
    assert torch.empty(0, dtype=dtype, device=dev).cpu().shape == (0,)
    close(torch.tensor(1 + 1j, dtype=dtype).to(dev) * 2, torch.tensor(2 + 2j, dtype=dtype))
    buf = io.BytesIO()
    torch.save(t, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf, map_location="cpu"), a)
    assert dtype in torch.accelerator.get_device_capability()["supported_dtypes"]


def test_casts_follow_pytorch():
    x = torch.tensor([1.5, -2.0, 0.0])
    c = torch.tensor([1 + 2j, -3 - 0.5j, 0j])
    close(x.to(dev).to(torch.complex64), x.to(torch.complex64))
    close(c.to(dev).to(torch.complex128), c.to(torch.complex128))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns once per process that the imaginary part is dropped
        close(c.to(dev).to(torch.float32), c.real)
    close(c.to(dev).to(torch.bool), c.to(torch.bool))


@pytest.mark.usefixtures("each_mode")
def test_conjugate_and_views_alias():
    a = crand(2, 3)
    t = a.to(dev)
    c = t.conj()
    assert c.is_conj()
    close(c, a.conj())  # a lazy conjugate read to the host
    close(c.resolve_conj(), a.conj().resolve_conj())
    close(c * 2, a.conj() * 2)
    close(t.real, a.real)
    close(t.imag, a.imag)
    close(torch.view_as_real(t), torch.view_as_real(a))
    pairs = torch.randn(4, 3, 2)
    close(torch.view_as_complex(pairs.to(dev)), torch.view_as_complex(pairs))
    # Writes through the real views land in the complex tensor, as on the CPU.
    ref = a.clone()
    t.real.mul_(2)
    ref.real.mul_(2)
    torch.view_as_real(t)[..., 1] = 7.0
    torch.view_as_real(ref)[..., 1] = 7.0
    close(t, ref)
    dst = torch.zeros(2, 3, dtype=torch.complex64, device=dev)
    dst.conj().copy_(t)  # writing through a conjugate view stores the conjugate
    close(dst, ref.conj())


@pytest.mark.usefixtures("each_mode")
@pytest.mark.parametrize("dtype", CDTYPES, ids=str)
def test_elementwise_and_reductions(dtype):
    a, b = crand(3, 5, dtype=dtype, seed=1), crand(3, 5, dtype=dtype, seed=2)
    a[0, 0] = complex(float("nan"), 1)
    a[0, 1] = complex(float("inf"), 0)
    a[1, 0] = 0
    A, B = a.to(dev), b.to(dev)
    for op in (torch.add, torch.sub, torch.mul, torch.div, torch.eq, torch.ne):
        close(op(A, B), op(a, b))
    r = torch.randn(5, dtype=torch.float64 if dtype == torch.complex128 else torch.float32)
    close(A * r.to(dev), a * r)
    close(A + 2.5, a + 2.5)
    close(A * (2 - 3j), a * (2 - 3j))
    close(torch.sub(A, B, alpha=2), torch.sub(a, b, alpha=2))
    fine = b  # no NaN or Inf: functions whose branch cuts differ only at special values
    for op in (torch.neg, torch.exp, torch.log, torch.sqrt, torch.rsqrt, torch.sin, torch.cos, torch.tanh,
               torch.reciprocal, torch.sgn, torch.abs, torch.angle, lambda z: z ** 2, lambda z: z ** 0.5,
               lambda z: torch.pow(z, z)):
        close(op(fine.to(dev)), op(fine), rtol=1e-4, atol=1e-5)
    for op in (torch.abs, torch.isnan, torch.isinf, torch.isfinite, torch.sgn, torch.neg):
        close(op(A), op(a))
    close(torch.abs(A), torch.abs(a))
    assert torch.abs(A).dtype == torch.abs(a).dtype
    close(B.sum(), b.sum())
    close(B.sum(1), b.sum(1))
    close(B.mean(0), b.mean(0))
    close(B.prod(1), b.prod(1), rtol=1e-4, atol=1e-5)
    close(torch.cat([A, B]), torch.cat([a, b]))
    close(torch.where(B.real > 0, A, B), torch.where(b.real > 0, a, b))


@pytest.mark.parametrize("dtype", CDTYPES, ids=str)
def test_matmul_with_conjugates(dtype):
    a, b = crand(4, 3, dtype=dtype, seed=3), crand(3, 5, dtype=dtype, seed=4)
    A, B = a.to(dev), b.to(dev)
    close(A @ B, a @ b)
    close(A.conj() @ B, a.conj() @ b)
    close(A.mH @ A, a.mH @ a)
    close(torch.bmm(A[None], B[None]), torch.bmm(a[None], b[None]))
    close(A @ B[:, 0], a @ b[:, 0])
    close(torch.dot(A[:, 0], A[:, 1]), torch.dot(a[:, 0], a[:, 1]))


def test_polar_and_complex():
    r, th = torch.rand(6) + 0.1, torch.randn(6)
    close(torch.polar(r.to(dev), th.to(dev)), torch.polar(r, th))
    close(torch.complex(r.to(dev), th.to(dev)), torch.complex(r, th))
    close(torch.complex(r.double().to(dev), th.double().to(dev)), torch.complex(r.double(), th.double()))
    with pytest.raises((TypeError, RuntimeError), match="ComplexHalf|complex32"):  # complex32 is no tpu dtype
        torch.complex(r.half().to(dev), th.half().to(dev))


@pytest.mark.usefixtures("each_mode")
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_family(norm):
    x = torch.randn(4, 6, 10, dtype=torch.float64)
    c = crand(4, 6, 10, dtype=torch.complex128, seed=5)
    X, C = x.to(dev), c.to(dev)
    F = torch.fft
    cases = [
        (F.fft, C, {}), (F.ifft, C, {}), (F.fft, C, dict(n=7, dim=0)), (F.fft, C, dict(n=13)),
        (F.fft2, C, {}), (F.ifft2, C, dict(dim=(0, 2))), (F.fftn, C, {}), (F.ifftn, C, dict(s=(3, 5))),
        (F.rfft, X, {}), (F.rfft, X, dict(n=9, dim=1)), (F.irfft, C, {}), (F.irfft, C, dict(n=11)),
        (F.rfft2, X, {}), (F.irfft2, C, {}), (F.rfftn, X, {}), (F.irfftn, C, dict(s=(4, 6, 10))),
        (F.hfft, C, {}), (F.ihfft, X, {}), (F.fft, X, {}),
    ]
    for fn, inp, kw in cases:
        want = fn(inp.cpu(), norm=norm, **kw)
        close(fn(inp, norm=norm, **kw), want, rtol=1e-9, atol=1e-9)
    # complex64 and a 4-d transform (done three dims at a time)
    c4 = crand(2, 3, 4, 5, seed=6)
    close(F.fftn(c4.to(dev), norm=norm), F.fftn(c4, norm=norm), rtol=1e-4, atol=1e-4)
    close(F.fftshift(F.fft(c4.to(dev))), F.fftshift(F.fft(c4)), rtol=1e-4, atol=1e-4)


def test_stft_and_istft():
    x = torch.randn(2, 200, dtype=torch.float64)
    w = torch.hann_window(32, dtype=torch.float64)
    spec = torch.stft(x, 32, hop_length=8, window=w, return_complex=True)
    got = torch.stft(x.to(dev), 32, hop_length=8, window=w.to(dev), return_complex=True)
    close(got, spec, rtol=1e-9, atol=1e-9)
    back = torch.istft(got, 32, hop_length=8, window=w.to(dev), length=200)
    close(back, torch.istft(spec, 32, hop_length=8, window=w, length=200), rtol=1e-9, atol=1e-9)


def rope(xq, freqs_cis):
    """llama's rotary embedding: pairs as complex numbers rotated by freqs_cis."""
    xc = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3).type_as(xq)


def freqs(dim, end, device):
    f = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device)[: dim // 2].float() / dim))
    t = torch.arange(end, device=device, dtype=torch.float32)
    f = torch.outer(t, f)
    return torch.polar(torch.ones_like(f), f)


@pytest.mark.usefixtures("each_mode")
def test_rotary_embedding_forward_and_backward():
    q = torch.randn(2, 8, 3, 16, requires_grad=True)
    w = torch.randn(16, 16, requires_grad=True)
    qt = q.detach().to(dev).requires_grad_()
    wt = w.detach().to(dev).requires_grad_()
    cis = freqs(16, 8, "cpu")
    cis_t = freqs(16, 8, dev)  # built on the device: arange, outer, polar
    close(cis_t, cis, rtol=1e-5, atol=1e-5)
    out = rope(q @ w, cis)
    out_t = rope(qt @ wt, cis_t)
    close(out_t, out.detach(), rtol=1e-4, atol=1e-4)
    (out * out).sum().backward()
    (out_t * out_t).sum().backward()
    close(qt.grad, q.grad, rtol=1e-4, atol=1e-4)
    close(wt.grad, w.grad, rtol=1e-4, atol=1e-3)


def test_rotary_embedding_compiled():
    cis = freqs(8, 6, dev)
    q = torch.randn(1, 6, 2, 8)
    qt = q.to(dev).requires_grad_()
    step = torch.compile(lambda x, c: (rope(x, c) ** 2).sum(), backend="tpu")
    loss = step(qt, cis)
    loss.backward()
    ref = q.clone().requires_grad_()
    want = (rope(ref, cis.cpu()) ** 2).sum()
    want.backward()
    close(loss, want.detach(), rtol=1e-4, atol=1e-4)
    close(qt.grad, ref.grad, rtol=1e-4, atol=1e-4)


def test_fft_autograd():
    x = torch.randn(3, 10, dtype=torch.float64, requires_grad=True)
    xt = x.detach().to(dev).requires_grad_()
    for fn in (lambda v: torch.fft.rfft(v).abs().sum(), lambda v: torch.fft.irfft(torch.fft.fft(v)).pow(2).sum(),
               lambda v: torch.view_as_real(torch.fft.fft2(v.to(torch.complex128))).sum()):
        x.grad = xt.grad = None
        fn(x).backward()
        fn(xt).backward()
        close(xt.grad, x.grad, rtol=1e-9, atol=1e-9)


def test_eig_runs_through_the_counted_cpu_fallback():
    a = torch.randn(4, 4, dtype=torch.float64)
    torchtpu.debug.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warned once per process, maybe by an earlier test
        w, v = torch.linalg.eig(a.to(dev))
    assert torchtpu.debug.metrics()["cpu_fallbacks"].get("aten::linalg_eig") == 1
    close(w, torch.linalg.eig(a)[0])
    v = v.cpu()
    torch.testing.assert_close(v @ torch.diag_embed(w.cpu()) @ torch.linalg.inv(v), a.to(torch.complex128))


def test_unlowered_complex_kernels_raise_a_clear_error():
    t = crand(3).to(dev)
    with pytest.raises(TypeError, match=r"aten::sigmoid.*complex tensors \(ComplexFloat\) are not supported on tpu"):
        torch.sigmoid(t)
    with pytest.raises(TypeError, match="not supported on tpu"):
        torch.special.erf(torch.view_as_real(t)).sum() + torch.erf(t)
    torchtpu.synchronize()


@pytest.mark.usefixtures("each_mode")
def test_data_movement_kernels():
    """The kernels complex_supported() lists for moving values, against the CPU."""
    a = crand(4, 5, seed=7)
    A = a.to(dev)
    idx = torch.tensor([3, 0, 2])
    mask = a.real > 0
    cases = [
        lambda t: t.clone(), lambda t: t[idx.to(t.device)], lambda t: t.index_select(1, idx.to(t.device)),
        lambda t: t.gather(1, idx.repeat(4, 1).to(t.device)), lambda t: t.flip(0), lambda t: t.roll(2, 1),
        lambda t: torch.nn.functional.pad(t, (1, 2)), lambda t: t.repeat(2, 1), lambda t: t.tril(),
        lambda t: t.triu(1), lambda t: torch.diag_embed(t[0]), lambda t: t.masked_fill(mask.to(t.device), 1 - 1j),
        lambda t: t[mask.to(t.device)], lambda t: torch.stack([t, t.conj()]), lambda t: t.narrow(1, 1, 3).contiguous(),
        lambda t: torch.zeros_like(t).scatter(1, idx.repeat(4, 1).to(t.device), t[:, :3]),
        lambda t: torch.zeros_like(t).index_put((idx.to(t.device),), t[:3]),
        lambda t: t.slice_scatter(t[:, :2] * 2, 1, 0, 2), lambda t: t.select_scatter(t[0] * 3, 0, 1),
        lambda t: t.diagonal_scatter(t.diagonal() * 0, 0), lambda t: t.T.reshape(-1)[::3],
        lambda t: torch.where(mask.to(t.device), t, 0),
    ]
    for i, fn in enumerate(cases):
        got, want = fn(A), fn(a)
        assert got.dtype == want.dtype, i
        close(got, want)


@pytest.mark.parametrize("dtype", CDTYPES, ids=str)
def test_addcmul_addcdiv_with_complex_operands(dtype):
    """Real tensors promoted by a complex operand (PyTorch's reference
    inputs mix float32, float64 and complex128), complex values, in-place."""
    a, b = torch.randn(5, 5), torch.randn(5, 5, dtype=torch.float64)
    c = crand(1, 5, dtype=dtype, seed=3)
    for fn in (torch.addcmul, torch.addcdiv):
        for value in (1, 0.5, 2 - 1j):
            close(fn(a.to(dev), b.to(dev), c.to(dev), value=value), fn(a, b, c, value=value))
    x = crand(4, dtype=dtype, seed=4)
    close(x.to(dev).addcmul_(x.to(dev), x.to(dev), value=1j), x.clone().addcmul_(x, x, value=1j))
    close(x.to(dev).addcdiv_(x.to(dev), x.to(dev) + 1, value=-0.5), x.clone().addcdiv_(x, x + 1, value=-0.5))


@pytest.mark.usefixtures("each_mode", "no_cpu_fallback")
@pytest.mark.parametrize("dtype", CDTYPES, ids=str)
def test_lu_family_and_triangular_solves(dtype):
    """LU (pivots by |re| + |im|, as LAPACK's), its solves with and without the adjoint
    (conjugate transpose) from either side, solve, inv, det, slogdet and the triangular solves,
    against the CPU, on the device (no fallback)."""
    a, b, bl = crand(3, 5, 5, dtype=dtype, seed=1), crand(3, 5, 2, dtype=dtype, seed=2), crand(3, 2, 5, dtype=dtype, seed=3)
    lu, piv = torch.linalg.lu_factor(a)
    lu_d, piv_d = torch.linalg.lu_factor(a.to(dev))
    close(lu_d, lu)
    assert torch.equal(piv_d.cpu(), piv)
    for left in (True, False):
        for adjoint in (False, True):
            rhs = b if left else bl
            close(torch.linalg.lu_solve(lu_d, piv_d, rhs.to(dev), left=left, adjoint=adjoint),
                  torch.linalg.lu_solve(lu, piv, rhs, left=left, adjoint=adjoint), rtol=1e-4, atol=1e-4)
    for got, want in zip(torch.linalg.lu(a.to(dev)), torch.linalg.lu(a)):
        close(got, want)
    close(torch.linalg.solve(a.to(dev), b.to(dev)), torch.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
    close(torch.linalg.inv(a.to(dev)), torch.linalg.inv(a), rtol=1e-4, atol=1e-4)
    for m in (a, a.mT):  # contiguous and not
        close(torch.linalg.det(m.to(dev)), torch.linalg.det(m), rtol=1e-4, atol=1e-4)
    sign, logabs = torch.linalg.slogdet(a)
    sign_d, logabs_d = torch.linalg.slogdet(a.to(dev))
    assert logabs_d.dtype == logabs.dtype
    close(sign_d, sign, rtol=1e-4, atol=1e-4)
    close(logabs_d, logabs, rtol=1e-4, atol=1e-4)
    t = torch.triu(a) + 3 * torch.eye(5)
    for upper in (True, False):
        m = t if upper else t.mT.contiguous()
        for left in (True, False):
            rhs = b if left else bl
            close(torch.linalg.solve_triangular(m.to(dev), rhs.to(dev), upper=upper, left=left),
                  torch.linalg.solve_triangular(m, rhs, upper=upper, left=left), rtol=1e-4, atol=1e-4)
        for transpose in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # triangular_solve is deprecated
                got = torch.triangular_solve(b.to(dev), m.to(dev), upper=upper, transpose=transpose)[0]
                want = torch.triangular_solve(b, m, upper=upper, transpose=transpose)[0]
            close(got, want, rtol=1e-4, atol=1e-4)


def test_eig_backward_and_complex_solve_backward():
    """linalg.eig's backward solves complex systems: on the device now, as on the CPU."""
    a = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    a_d = a.detach().to(dev).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eig itself: the counted CPU fallback
        for x in (a, a_d):
            w, v = torch.linalg.eig(x)
            (w.abs().sum() + v.abs().sum()).backward()
    close(a_d.grad, a.grad)
    x = crand(4, 4, seed=5).requires_grad_()
    x_d = x.detach().to(dev).requires_grad_()
    for m in (x, x_d):
        torch.linalg.solve(m, torch.ones(4, 1, dtype=m.dtype, device=m.device)).abs().sum().backward()
    close(x_d.grad, x.grad, rtol=1e-4, atol=1e-4)


def test_complex_cholesky_family_runs_through_the_counted_cpu_fallback():
    a = crand(4, 4, dtype=torch.complex128, seed=6)
    b = crand(4, 2, dtype=torch.complex128, seed=7)
    h = a @ a.mH + 5 * torch.eye(4)
    l = torch.linalg.cholesky(h)
    torchtpu.debug.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.linalg.cholesky(h.to(dev))
        solved = torch.cholesky_solve(b.to(dev), l.to(dev))
        inverse = torch.cholesky_inverse(l.to(dev))
    fallbacks = torchtpu.debug.metrics()["cpu_fallbacks"]
    for op in ("aten::linalg_cholesky_ex", "aten::_cholesky_solve_helper", "aten::cholesky_inverse"):
        assert fallbacks.get(op) == 1, fallbacks
    close(got, l)
    close(solved, torch.cholesky_solve(b, l))
    close(inverse, torch.cholesky_inverse(l))

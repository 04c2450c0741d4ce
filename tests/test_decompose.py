"""Orthogonal decompositions on the device, in every mode: QR, geqrf,
householder_product and ormqr against the CPU's LAPACK (same Householder
conventions); eigh and the SVD against the CPU's values and through their
invariants (reconstruction, orthonormal vectors; vectors are unique only up
to sign); the composite ops built on them (pinv, matrix_rank, norms, cond);
batched, wide, tall, empty and float64 inputs, matrices past the unrolled
sizes, gradients, non-finite inputs, and no CPU fallback."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

G = torch.Generator().manual_seed(0)


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=G, dtype=dtype)


def close(got, want, tol):
    got = got.cpu()
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


def no_fallbacks():
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


@pytest.fixture(autouse=True)
def _reset():
    torchtpu.debug.reset_metrics()


SHAPES = [(5, 5), (7, 3), (3, 7), (2, 4, 4), (2, 1, 6, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_lapack(shape, mode):
    a = rand(*shape)
    q, r = torch.linalg.qr(a, mode=mode)
    qd, rd = torch.linalg.qr(a.to("tpu"), mode=mode)
    close(rd, r, 1e-5)
    close(qd, q, 1e-5)
    no_fallbacks()


@pytest.mark.parametrize("shape", SHAPES)
def test_geqrf_householder_product_ormqr(shape):
    a = rand(*shape)
    p, tau = torch.geqrf(a)
    pd, taud = torch.geqrf(a.to("tpu"))
    close(pd, p, 1e-5)
    close(taud, tau, 1e-5)
    if shape[-2] >= shape[-1]:
        close(torch.linalg.householder_product(pd, taud), torch.linalg.householder_product(p, tau), 1e-5)
    m = shape[-2]
    for left in (True, False):
        for transpose in (True, False):
            c = rand(*shape[:-2], m, 3) if left else rand(*shape[:-2], 3, m)
            want = torch.ormqr(p, tau, c, left=left, transpose=transpose)
            close(torch.ormqr(pd, taud, c.to("tpu"), left=left, transpose=transpose), want, 1e-5)
    no_fallbacks()


def check_svd(a, full, tol):
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=full)
    s_ref = torch.linalg.svdvals(a)
    close(s, s_ref, tol)
    u, s, vh = u.cpu(), s.cpu(), vh.cpu()
    k = s.shape[-1]
    recon = (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]
    torch.testing.assert_close(recon, a, rtol=tol, atol=tol * max(1.0, s_ref.max().item() if s_ref.numel() else 1))
    eye_u = torch.eye(u.shape[-1], dtype=a.dtype).expand(u.mT.shape[:-1] + (u.shape[-1],))
    torch.testing.assert_close(u.mT @ u, eye_u, rtol=tol, atol=tol)
    eye_v = torch.eye(vh.shape[-2], dtype=a.dtype)
    torch.testing.assert_close(vh @ vh.mT, eye_v.expand_as(vh @ vh.mT), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", SHAPES + [(0, 3), (4, 0), (0, 2, 2)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_values_and_invariants(shape, full):
    check_svd(rand(*shape), full, 1e-4)
    check_svd(rand(*shape, dtype=torch.float64), full, 1e-10)
    no_fallbacks()


def test_non_contiguous_inputs():
    a = rand(2, 6, 5).transpose(-1, -2)  # [2, 5, 6], not contiguous
    check_svd(a, False, 1e-4)
    qd, rd = torch.linalg.qr(a.to("tpu").transpose(-1, -2).transpose(-1, -2))
    q, r = torch.linalg.qr(a)
    close(rd, r, 1e-5)
    close(qd, q, 1e-5)
    s = (a @ a.mT)[:, ::2, ::2]
    close(torch.linalg.eigvalsh(s.to("tpu")), torch.linalg.eigvalsh(s), 1e-4)
    no_fallbacks()


def test_svd_rank_deficient_and_large():
    a = rand(6, 2) @ rand(2, 5)  # rank 2: three zero singular values, U still orthonormal
    check_svd(a, True, 1e-4)
    check_svd(rand(80, 70), False, 1e-3)  # past the unrolled factorizations' 64 columns
    no_fallbacks()


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 4, 4), (0, 3, 3)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, uplo):
    a = rand(*shape)
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
        x = a.to(dtype)
        w_ref = torch.linalg.eigvalsh(x, UPLO=uplo)
        w, v = torch.linalg.eigh(x.to("tpu"), UPLO=uplo)
        close(w, w_ref, tol)
        close(torch.linalg.eigvalsh(x.to("tpu"), UPLO=uplo), w_ref, tol)
        sym = x.tril() + x.tril(-1).mT if uplo == "L" else x.triu() + x.triu(1).mT
        v = v.cpu()
        torch.testing.assert_close(v @ torch.diag_embed(w.cpu()) @ v.mT, sym, rtol=tol, atol=tol * 10)
        torch.testing.assert_close(v.mT @ v, torch.eye(shape[-1], dtype=dtype).expand_as(v), rtol=tol, atol=tol)
    no_fallbacks()


def test_eigh_repeated_eigenvalues_and_large():
    q, _ = torch.linalg.qr(rand(6, 6))
    a = q @ torch.diag(torch.tensor([1.0, 1.0, 1.0, 2.0, -3.0, -3.0])) @ q.mT
    w, v = torch.linalg.eigh(a.to("tpu"))
    close(w, torch.tensor([-3.0, -3.0, 1.0, 1.0, 1.0, 2.0]), 1e-5)
    torch.testing.assert_close(v.cpu() @ torch.diag(w.cpu()) @ v.cpu().mT, a, rtol=1e-4, atol=1e-4)
    b = rand(70, 70)
    b = b + b.mT
    close(torch.linalg.eigvalsh(b.to("tpu")), torch.linalg.eigvalsh(b), 1e-3)
    no_fallbacks()


def test_composites_run_natively():
    a = rand(5, 4)
    close(torch.linalg.pinv(a.to("tpu")), torch.linalg.pinv(a), 1e-4)
    close(torch.linalg.matrix_rank(a.to("tpu")), torch.linalg.matrix_rank(a), 0)
    low = rand(5, 2) @ rand(2, 4)
    close(torch.linalg.matrix_rank(low.to("tpu")), torch.linalg.matrix_rank(low), 0)
    close(torch.linalg.matrix_norm(a.to("tpu"), "nuc"), torch.linalg.matrix_norm(a, "nuc"), 1e-4)
    close(torch.linalg.matrix_norm(a.to("tpu"), 2), torch.linalg.matrix_norm(a, 2), 1e-4)
    close(torch.linalg.cond(a[:4].to("tpu")), torch.linalg.cond(a[:4]), 1e-3)
    s = a.T @ a
    close(torch.linalg.pinv(s.to("tpu"), hermitian=True), torch.linalg.pinv(s, hermitian=True), 1e-3)
    no_fallbacks()


def test_gradients():
    a = rand(5, 4)
    b = rand(4, 4)
    b = b + b.mT

    def grads(f, x):
        x = x.clone().requires_grad_()
        f(x).backward()
        return x.grad

    for f, x in ((lambda x: torch.linalg.svdvals(x).sum(), a),
                 (lambda x: torch.linalg.pinv(x).sum(), a),
                 (lambda x: torch.linalg.qr(x)[1].sum() + torch.linalg.qr(x)[0].sum(), a),
                 (lambda x: torch.linalg.eigvalsh(x).pow(2).sum(), b),
                 (lambda x: (torch.linalg.eigh(x)[1].abs() ** 2 * torch.arange(4.0, device=x.device)).sum(), b)):
        close(grads(f, x.to("tpu")), grads(f, x), 1e-3)
    no_fallbacks()


def test_non_finite_and_bad_arguments():
    a = rand(4, 4)
    a[1, 2] = float("nan")
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.linalg.svd(a.to("tpu"))[1].cpu()
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.linalg.eigvalsh(a.to("tpu"), UPLO="U").cpu()
    # The NaN lies in the triangle UPLO="L" does not read: as LAPACK, no error.
    close(torch.linalg.eigvalsh(a.to("tpu"), UPLO="L"), torch.linalg.eigvalsh(a, UPLO="L"), 1e-4)
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        torch.linalg.qr(a.to("tpu"), mode="full")
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.eigh(rand(3, 4).to("tpu"))
    with pytest.raises(NotImplementedError):
        torch.linalg.svd(rand(3, 3).bfloat16().to("tpu"))


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(6, 3), (3, 3), (3, 5), (2, 6, 3)])
def test_lstsq_every_driver(driver, shape):
    a = rand(*shape)
    b = rand(*shape[:-1], 2)
    want = torch.linalg.lstsq(a, b, driver=driver)
    got = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver)
    for g, w in zip(got, want):  # solution, residuals, rank, singular values (empty where the driver has none)
        close(g, w, 1e-4)
    vec = torch.linalg.lstsq(a.to("tpu"), b[..., 0].to("tpu"), driver=driver).solution
    close(vec, torch.linalg.lstsq(a, b[..., 0], driver=driver).solution, 1e-4)
    no_fallbacks()


def test_lstsq_rank_deficient_gives_the_minimum_norm_solution():
    a = rand(6, 2) @ rand(2, 4)
    b = rand(6, 3)
    got = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver="gelsd")
    want = torch.linalg.lstsq(a, b, driver="gelsd")
    close(got.solution, want.solution, 1e-3)
    close(got.rank, want.rank, 0)
    assert got.residuals.numel() == 0 == want.residuals.numel()  # not full rank: no residuals
    no_fallbacks()


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_and_pdist(p):
    x1, x2 = rand(2, 4, 3), rand(1, 5, 3)
    x2[0, 1] = x1[1, 2]  # a zero distance
    for mode in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        close(torch.cdist(x1.to("tpu"), x2.to("tpu"), p=p, compute_mode=mode),
              torch.cdist(x1, x2, p=p, compute_mode=mode), 1e-4)

    def g(f, *xs):
        xs = [x.clone().requires_grad_() for x in xs]
        (f(*xs) * torch.arange(f(*xs).numel(), dtype=torch.float32, device=xs[0].device).view(f(*xs).shape)).sum() \
            .backward()
        return [x.grad for x in xs]

    for got, want in zip(g(lambda a, b: torch.cdist(a, b, p=p), x1.to("tpu"), x2.to("tpu")),
                         g(lambda a, b: torch.cdist(a, b, p=p), x1, x2)):
        close(got, want, 1e-3)
    y = rand(6, 3)
    y[4] = y[1]
    close(torch.nn.functional.pdist(y.to("tpu"), p=p), torch.nn.functional.pdist(y, p=p), 1e-4)
    close(g(lambda a: torch.nn.functional.pdist(a, p=p), y.to("tpu"))[0],
          g(lambda a: torch.nn.functional.pdist(a, p=p), y)[0], 1e-3)
    close(torch.nn.functional.pdist(y[:1].to("tpu")), torch.nn.functional.pdist(y[:1]), 0)
    no_fallbacks()


def test_matrix_exp():
    for a in (rand(4, 4), rand(3, 5, 5) * 4, torch.zeros(2, 3, 3), rand(1, 1), torch.empty(0, 2, 2)):
        truth = torch.linalg.matrix_exp(a.double())
        got = torch.linalg.matrix_exp(a.to("tpu")).cpu()
        cpu_err = (torch.linalg.matrix_exp(a).double() - truth).abs().max().item() if a.numel() else 0.0
        scale = truth.abs().max().item() if a.numel() else 1.0
        # As accurate as the CPU's float32 kernel, relative to the result's size.
        err = (got.double() - truth).abs().max().item() if a.numel() else 0.0
        assert got.shape == a.shape and err <= max(4 * cpu_err, 1e-6 * scale), (a.shape, err, cpu_err)
        close(torch.linalg.matrix_exp(a.double().to("tpu")), truth, 1e-9 * max(scale, 1.0))
    x = rand(3, 3).requires_grad_()
    xd = x.detach().to("tpu").requires_grad_()
    torch.linalg.matrix_exp(x).sum().backward()
    torch.linalg.matrix_exp(xd).sum().backward()
    close(xd.grad, x.grad, 1e-4)
    no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matrix_exp_16_bit_is_the_float32_result_rounded_once(dtype):
    # (PyTorch's CPU kernel in 16 bits overflows: inf and NaN for a 3x3 of norm 1.)
    for a in (rand(3, 3), rand(2, 4, 4) * 2, torch.zeros(1, 2, 2)):
        a = a.to(dtype)
        got = torch.linalg.matrix_exp(a.to("tpu"))
        assert got.dtype == dtype
        want = torch.linalg.matrix_exp(a.float()).to(dtype)
        torch.testing.assert_close(got.cpu(), want, rtol=2 ** -7, atol=1e-5)
    no_fallbacks()

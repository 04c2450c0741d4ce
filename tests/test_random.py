"""Random ops on the device generator, in every mode: the distribution of each
(moments and support against their closed forms, on 100k draws),
reproducibility per seed, parameter errors, and no CPU fallback. Values
differ from the CPU's generator by design; what is compared is the law."""
import math

import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

N = 100_000


def moments(t):
    t = t.double().cpu()
    return t.mean().item(), t.std().item()


def close(got, want, tol):
    assert abs(got - want) <= tol, (got, want)


def assert_native():
    torchtpu.synchronize()
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def empty(dtype=torch.float32):
    return torch.empty(N, device="tpu", dtype=dtype)


@pytest.fixture(autouse=True)
def _seed():
    torchtpu.debug.reset_metrics()
    torch.tpu.manual_seed(1234)


def test_continuous_distributions():
    m, s = moments(empty().exponential_(2.0))
    close(m, 0.5, 0.01), close(s, 0.5, 0.01)
    x = empty().log_normal_(0.5, 0.25)
    m, s = moments(x)
    mean = math.exp(0.5 + 0.25 ** 2 / 2)
    close(m, mean, 0.01 * mean), close(s, mean * math.sqrt(math.exp(0.25 ** 2) - 1), 0.02 * mean)
    assert x.min().item() > 0
    c = empty().cauchy_(1.5, 0.5).cpu()
    close(c.median().item(), 1.5, 0.02)
    q = c.quantile(torch.tensor([0.25, 0.75], dtype=torch.float32))
    close((q[1] - q[0]).item(), 1.0, 0.03)  # the interquartile range is 2 sigma
    for dtype in (torch.bfloat16, torch.float16, torch.float64):
        m, s = moments(empty(dtype).exponential_())
        close(m, 1.0, 0.03), close(s, 1.0, 0.03)
    assert_native()


def test_geometric_is_a_positive_count():
    g = empty().geometric_(0.3)
    m, s = moments(g)
    close(m, 1 / 0.3, 0.05), close(s, math.sqrt(0.7) / 0.3, 0.05)
    gc = g.cpu()
    assert gc.min().item() == 1 and torch.equal(gc, gc.round())
    gi = empty(torch.int64).geometric_(0.5)
    close(moments(gi)[0], 2.0, 0.03)
    assert_native()


def test_normal_with_tensor_parameters_broadcasts():
    mean = torch.linspace(-2, 2, 5, device="tpu")[:, None]
    std = torch.tensor([0.5, 1.0, 2.0], device="tpu")
    x = torch.normal(mean.expand(5, 3).repeat(N // 20, 1), std.repeat(N // 20 * 5, 1)[:, :3] if False else 1.0)
    assert x.shape == (N // 20 * 5, 3)
    y = torch.normal(mean.expand(5, 3).contiguous().repeat(4000, 1), std.expand(20000, 3))
    assert y.shape == (20000, 3) and y.device.type == "tpu"
    yc = y.cpu().view(4000, 5, 3)
    for i, mu in enumerate(torch.linspace(-2, 2, 5).tolist()):
        for j, sd in enumerate((0.5, 1.0, 2.0)):
            close(yc[:, i, j].mean().item(), mu, 4 * sd / math.sqrt(4000) + 1e-3)
            close(yc[:, i, j].std().item(), sd, 0.06 * sd)
    z = torch.normal(3.0, torch.full((N,), 2.0, device="tpu"))
    m, s = moments(z)
    close(m, 3.0, 0.05), close(s, 2.0, 0.03)
    out = torch.empty(N, device="tpu")
    torch.normal(torch.zeros(N, device="tpu"), 1.0, out=out)
    m, s = moments(out)
    close(m, 0.0, 0.02), close(s, 1.0, 0.02)
    assert_native()


def test_normal_refuses_negative_or_nan_std():
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(torch.zeros(3, device="tpu"), torch.tensor([1.0, -1.0, 1.0], device="tpu")).cpu()
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(torch.zeros(3, device="tpu"), torch.tensor([1.0, float("nan"), 1.0], device="tpu")).cpu()
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torch.normal(torch.zeros(3, device="tpu"), -1.0)


def test_bernoulli_with_tensor_probabilities():
    p = torch.tensor([0.0, 0.2, 0.5, 0.9, 1.0], device="tpu").repeat(N // 5)
    b = torch.bernoulli(p).cpu().view(-1, 5)
    assert b.dtype == torch.float32
    for j, pj in enumerate((0.0, 0.2, 0.5, 0.9, 1.0)):
        close(b[:, j].mean().item(), pj, 0.015)
    x = torch.empty(N // 5, 5, device="tpu", dtype=torch.bool).bernoulli_(torch.tensor([0.3, 0.7, 0, 1, 0.5],
                                                                                       device="tpu"))
    close(x.float().mean(0)[1].item(), 0.7, 0.015)
    with pytest.raises(RuntimeError, match="0 <= p <= 1"):
        torch.bernoulli(torch.tensor([0.5, 1.5], device="tpu")).cpu()
    assert_native()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32,
                                   torch.bfloat16, torch.bool])
def test_randint_and_random_cover_their_ranges(dtype):
    lo, hi = (0, 2) if dtype == torch.bool else (-3, 7) if dtype not in (torch.uint8,) else (2, 9)
    r = torch.randint(lo, hi, (N,), device="tpu", dtype=dtype).cpu().long()
    assert r.min().item() == lo and r.max().item() == hi - 1
    counts = torch.bincount(r - lo, minlength=hi - lo).double() / N
    assert (counts - 1 / (hi - lo)).abs().max().item() < 0.01
    full = torch.empty(N, device="tpu", dtype=dtype).random_().cpu()
    top = {torch.int8: 127, torch.uint8: 255, torch.bool: 1, torch.bfloat16: 256, torch.float32: 2 ** 24}.get(dtype)
    if top is not None:
        assert full.double().min().item() >= 0 and full.double().max().item() <= top
        assert full.double().max().item() >= 0.9 * top
    assert_native()


def test_randint_wide_and_errors():
    r = torch.randint(-2 ** 40, 2 ** 40, (N,), device="tpu").cpu().double() / 2 ** 40
    close(r.mean().item(), 0.0, 0.01), close(r.std().item(), 1 / math.sqrt(3), 0.01)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        torch.empty(3, device="tpu").random_(5, 2)
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.empty(3, device="tpu", dtype=torch.int8).random_(0, 1000)
    assert_native()


def test_randperm_is_a_uniform_permutation():
    for n in (0, 1, 7, 1000):
        p = torch.randperm(n, device="tpu")
        assert p.dtype == torch.int64 and p.device.type == "tpu"
        assert torch.equal(p.cpu().sort().values, torch.arange(n))
    firsts = torch.stack([torch.randperm(4, device="tpu")[0] for _ in range(400)]).cpu()
    assert (torch.bincount(firsts, minlength=4).double() / 400 - 0.25).abs().max().item() < 0.08
    pf = torch.randperm(10, device="tpu", dtype=torch.float32).cpu()
    assert torch.equal(pf.sort().values, torch.arange(10.0))
    assert_native()


def test_multinomial_with_and_without_replacement():
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]], device="tpu")
    s = torch.multinomial(probs, 20_000, replacement=True).cpu()
    assert s.shape == (2, 20_000) and s.dtype == torch.int64
    freq = torch.stack([torch.bincount(s[i], minlength=4) for i in range(2)]).double() / 20_000
    assert (freq - torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25] * 4])).abs().max().item() < 0.015
    picks = torch.stack([torch.multinomial(probs[0], 2) for _ in range(300)]).cpu()
    assert (picks[:, 0] != picks[:, 1]).all()
    assert (picks != 1).all()  # a zero probability is never drawn while others remain
    first = torch.bincount(picks[:, 0], minlength=4).double() / 300
    assert (first - torch.tensor([0.1, 0.0, 0.6, 0.3])).abs().max().item() < 0.09
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    torch.multinomial(probs, 3, out=out)
    assert out.shape == (2, 3) and all(len(set(r)) == 3 for r in out.cpu().tolist())
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        torch.multinomial(probs, 5)
    with pytest.raises(RuntimeError, match="probability tensor contains either"):
        torch.multinomial(torch.tensor([0.5, -1.0], device="tpu"), 1).cpu()
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        torch.multinomial(torch.zeros(2, 3, device="tpu"), 2, replacement=True).cpu()
    assert_native()


def test_seeds_reproduce_and_differ():
    def draw():
        return torch.cat([empty().exponential_()[:8], torch.randint(0, 100, (8,), device="tpu").float(),
                          torch.randperm(8, device="tpu").float(), torch.multinomial(torch.ones(8, device="tpu"),
                                                                                     8).float()]).cpu()
    torch.tpu.manual_seed(7)
    a = draw()
    torch.tpu.manual_seed(7)
    b = draw()
    c = draw()
    assert torch.equal(a, b) and not torch.equal(a, c)
    g = torch.Generator(device="tpu").manual_seed(3)
    x = torch.empty(8, device="tpu").cauchy_(generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(x, torch.empty(8, device="tpu").cauchy_(generator=g).cpu())

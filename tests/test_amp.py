"""Mixed precision on tpu, in every mode: torch.autocast("tpu") casts each op
class as CUDA's autocast lists say (checked against a hand-written table of
those lists, values against the CPU computing the same casts by hand), and
torch.amp.GradScaler("tpu") steps, skips and rescales as the CPU's
GradScaler does, with its two kernels on the device."""
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import debug

pytestmark = pytest.mark.usefixtures("each_mode")

LOW = (torch.bfloat16, torch.float16)


def rnd(*shape, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# (name, function of CPU-or-tpu inputs, inputs, autocast class) where the class
# says what CUDA's autocast does: "low" runs in the autocast dtype, "fp32" in
# float32, "promote" in the widest input dtype.
CASES = [
    ("mm", torch.mm, lambda: [rnd(4, 8), rnd(8, 3, seed=1)], "low"),
    ("matmul", torch.matmul, lambda: [rnd(2, 4, 8), rnd(8, 3, seed=1)], "low"),
    ("bmm", torch.bmm, lambda: [rnd(2, 4, 8), rnd(2, 8, 3, seed=1)], "low"),
    ("addmm", torch.addmm, lambda: [rnd(3), rnd(4, 8, seed=1), rnd(8, 3, seed=2)], "low"),
    ("baddbmm", torch.baddbmm, lambda: [rnd(2, 4, 3), rnd(2, 4, 8, seed=1), rnd(2, 8, 3, seed=2)], "low"),
    ("linear", F.linear, lambda: [rnd(5, 8), rnd(6, 8, seed=1), rnd(6, seed=2)], "low"),
    ("conv2d", F.conv2d, lambda: [rnd(1, 2, 6, 6), rnd(3, 2, 3, 3, seed=1)], "low"),
    ("sdpa", F.scaled_dot_product_attention, lambda: [rnd(1, 2, 4, 8), rnd(1, 2, 4, 8, seed=1),
                                                      rnd(1, 2, 4, 8, seed=2)], "low"),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), lambda: [rnd(4, 8), rnd(8, 3, seed=1)], "low"),
    ("exp", torch.exp, lambda: [rnd(5, 3, dtype=torch.bfloat16)], "fp32"),
    ("log_softmax", lambda a: torch.log_softmax(a, -1), lambda: [rnd(5, 3, dtype=torch.bfloat16)], "fp32"),
    ("softmax", lambda a: torch.softmax(a, -1), lambda: [rnd(5, 3, dtype=torch.float16)], "fp32"),
    ("layer_norm", lambda a: F.layer_norm(a, (3,)), lambda: [rnd(5, 3, dtype=torch.bfloat16)], "fp32"),
    ("mse_loss", F.mse_loss, lambda: [rnd(5, 3, dtype=torch.bfloat16), rnd(5, 3, seed=1)], "fp32"),
    ("sum", torch.sum, lambda: [rnd(5, 3, dtype=torch.bfloat16)], "fp32"),
    ("cumsum", lambda a: torch.cumsum(a, 0), lambda: [rnd(5, 3, dtype=torch.float16)], "fp32"),
    ("pow", torch.pow, lambda: [rnd(5, 3, dtype=torch.bfloat16).abs(), rnd(5, 3, seed=1).abs()], "fp32"),
    ("addcmul", torch.addcmul, lambda: [rnd(4, dtype=torch.bfloat16), rnd(4, seed=1), rnd(4, seed=2)],
     "promote"),
    ("atan2", torch.atan2, lambda: [rnd(4, dtype=torch.float16), rnd(4, seed=1)], "promote"),
]


def expected(fn, inputs, kind, fast):
    """The CPU result of `fn` with the casts autocast makes done by hand."""
    if kind == "low":
        cast = [t.to(fast) if t.is_floating_point() else t for t in inputs]
    elif kind == "fp32":
        cast = [t.float() if t.is_floating_point() else t for t in inputs]
    else:
        widest = torch.float32 if any(t.dtype == torch.float32 for t in inputs) else inputs[0].dtype
        cast = [t.to(widest) for t in inputs]
    return fn(*cast)


@pytest.mark.parametrize("fast", LOW, ids=str)
@pytest.mark.parametrize("name,fn,make,kind", CASES, ids=[c[0] for c in CASES])
def test_op_classes(name, fn, make, kind, fast):
    inputs = make()
    if kind == "promote":  # a 16-bit input of the other 16-bit type is an error, as on CUDA
        inputs = [t.to(fast) if t.dtype in LOW else t for t in inputs]
    want = expected(fn, inputs, kind, fast)
    with torch.autocast("tpu", dtype=fast):
        got = fn(*[t.to("tpu") for t in inputs])
    want_dtype = {"low": fast, "fp32": torch.float32, "promote": want.dtype}[kind]
    assert got.dtype == want_dtype, f"{name} under {fast} autocast: {got.dtype}, CUDA's lists give {want_dtype}"
    tol = 2e-2 if got.dtype in LOW else 1e-5
    torch.testing.assert_close(got.cpu(), want.to(got.dtype), rtol=tol, atol=tol)


def test_outside_lists_and_disabled():
    a = rnd(4, 8).to("tpu")
    b = rnd(8, 3, seed=1).to("tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        assert torch.relu(a).dtype == torch.float32       # on no list: unchanged
        assert (a.bfloat16() + a).dtype == torch.float32  # type promotion as usual
        with torch.autocast("tpu", enabled=False):
            assert (a @ b).dtype == torch.float32
        assert (a @ b).dtype == torch.bfloat16
        assert (a.double() @ b.double()).dtype == torch.float64  # float64 is not cast
        assert (a.cpu() @ b.cpu()).dtype == torch.float32        # the cpu is not autocast by "tpu"
    assert (a @ b).dtype == torch.float32


def test_backward_grads_keep_param_dtype():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4)
    ref = torch.nn.Linear(8, 4)
    ref.load_state_dict(lin.state_dict())
    lin = lin.to("tpu")
    x = rnd(3, 8)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = lin(x.to("tpu"))
        loss = out.float().pow(2).mean()
    assert out.dtype == torch.bfloat16
    loss.backward()
    out_ref = F.linear(x.bfloat16(), ref.weight.bfloat16(), ref.bias.bfloat16())
    out_ref.float().pow(2).mean().backward()
    assert lin.weight.grad.dtype == torch.float32
    torch.testing.assert_close(lin.weight.grad.cpu(), ref.weight.grad, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lin.bias.grad.cpu(), ref.bias.grad, rtol=2e-2, atol=2e-2)


def test_binary_cross_entropy_refused():
    p = torch.rand(3).to("tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)
        assert F.binary_cross_entropy_with_logits(p, p).dtype == torch.float32


def test_device_module():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.tpu.is_bf16_supported()
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert torch.is_autocast_enabled("tpu")
        assert (rnd(2, 2).to("tpu") @ rnd(2, 2).to("tpu")).dtype == torch.float16
    assert not torch.is_autocast_enabled("tpu")
    with pytest.warns(UserWarning, match="not supported"):
        with torch.autocast("tpu", dtype=torch.float64):
            pass


# GradScaler

def grads_with(values, dtype):
    out = []
    for i, shape in enumerate([(4, 3), (5,), (), (0,), (3, 4)]):
        t = rnd(*shape, seed=i).to(dtype)
        out.append(t)
    for i, v in values:
        out[i].view(-1)[0] = v
    out[4] = out[4].t()  # non-contiguous
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("bad", [[], [(0, math.inf)], [(1, math.nan)], [(2, -math.inf)]], ids=str)
def test_unscale_kernel(dtype, bad):
    debug.reset_metrics()
    want = grads_with(bad, dtype)
    got = [g.to("tpu") for g in want]
    found_cpu, found = torch.zeros(1), torch.zeros(1).to("tpu")
    inv = torch.full((1,), 1 / 1024)
    torch._amp_foreach_non_finite_check_and_unscale_(want, found_cpu, inv)
    torch._amp_foreach_non_finite_check_and_unscale_(got, found, inv.to("tpu"))
    assert found.item() == found_cpu.item() == (1.0 if bad else 0.0)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, equal_nan=True)
    # found_inf only ever goes up: a clean second call keeps it.
    torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(2).to("tpu")], found, inv.to("tpu"))
    assert found.item() == found_cpu.item()
    assert debug.metrics()["cpu_fallbacks"] == {}


def test_update_scale_kernel():
    scale_cpu, tracker_cpu = torch.full((1,), 4.0), torch.zeros(1, dtype=torch.int32)
    scale, tracker = scale_cpu.to("tpu"), tracker_cpu.to("tpu")
    for inf in [0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0]:
        found = torch.full((1,), float(inf))
        torch._amp_update_scale_(scale_cpu, tracker_cpu, found, 2.0, 0.5, 3)
        torch._amp_update_scale_(scale, tracker, found.to("tpu"), 2.0, 0.5, 3)
        assert scale.item() == scale_cpu.item() and tracker.item() == tracker_cpu.item()
    # growth that would overflow float32 keeps the scale
    big, t = torch.full((1,), 3e38).to("tpu"), torch.zeros(1, dtype=torch.int32).to("tpu")
    torch._amp_update_scale_(big, t, torch.zeros(1).to("tpu"), 2.0, 0.5, 1)
    assert big.item() == pytest.approx(3e38) and t.item() == 0
    with pytest.raises(RuntimeError, match="_amp_update_scale_.*int32"):
        torch._amp_update_scale_(big, torch.zeros(1).to("tpu"), torch.zeros(1).to("tpu"), 2.0, 0.5, 1)


def scaled_training(device, fused, steps=6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**8, growth_interval=2)
    scales = []
    for step in range(steps):
        x = rnd(6, 8, seed=step).to(device)
        loss = model(x).float().pow(2).mean()
        if step == 3:
            loss = loss * math.inf  # an overflow: the step is skipped and the scale backs off
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        scales.append(scaler.get_scale())
    return [p.detach().cpu() for p in model.parameters()], scales


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_grad_scaler_training_matches_cpu(fused):
    want, want_scales = scaled_training("cpu", fused)
    got, scales = scaled_training("tpu", fused)
    assert scales == want_scales == [256.0, 512.0, 512.0, 256.0, 256.0, 512.0]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_scaler_kernels_check_their_operands():
    grads = [torch.ones(2).to("tpu")]
    one = torch.ones(1).to("tpu")
    with pytest.raises(RuntimeError, match="found_inf must be a one-element float32 tensor, got \\[2\\]"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(2).to("tpu"), one)
    with pytest.raises(RuntimeError, match="growth_tracker must be a one-element int32 tensor"):
        torch._amp_update_scale_(one.clone(), torch.zeros(1).to("tpu"), torch.zeros(1).to("tpu"), 2.0, 0.5, 2)


def test_grad_scaler_float64_parameters():
    """float64 gradients go through the same kernels: steps, skipped steps and
    scale changes as on the CPU."""
    torch.manual_seed(0)
    x = torch.randn(8, 4, dtype=torch.float64)
    runs = {}
    for device in ("cpu", "tpu"):
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 2).double().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
        scales = []
        for step in range(5):
            opt.zero_grad()
            loss = model(x.to(device)).sum() * (math.inf if step == 2 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        runs[device] = ([p.detach().cpu() for p in model.parameters()], scales)
    assert runs["tpu"][1] == runs["cpu"][1] == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    for g, w in zip(runs["tpu"][0], runs["cpu"][0]):
        assert g.dtype == torch.float64
        torch.testing.assert_close(g, w)


def test_float16_autocast_with_scaler():
    """float16 autocast with a scaler against the CPU doing the same casts by
    hand: the first step overflows float16 (2**16 times a sum of inputs) and
    is skipped, later ones step."""
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**16)
        out_dtypes, scales = [], []
        for step in range(3):
            x = rnd(4, 8, seed=step).to(device)
            if device == "cpu":
                out = F.linear(x.half(), model.weight.half(), model.bias.half())
            else:
                with torch.autocast("tpu", dtype=torch.float16):
                    out = model(x)
            out_dtypes.append(out.dtype)
            scaler.scale(out.float().sum()).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            scales.append(scaler.get_scale())
        return [p.detach().cpu() for p in model.parameters()], out_dtypes, scales

    want, _, want_scales = train("cpu")
    got, dtypes, scales = train("tpu")
    assert dtypes == [torch.float16] * 3
    assert scales == want_scales and scales[0] == 2.0**15
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-3)


def test_bf16_decoder_training_tracks_fp32():
    """The test decoder trained under bfloat16 autocast follows the float32
    loss curve (benchmarks/amp.py prints both over 60 steps)."""
    from torchtpu.testing.models import CharData, TinyGPT

    def curve(autocast):
        torch.manual_seed(0)
        data = CharData()
        model = TinyGPT(data.vocab, width=32, layers=2, heads=2, max_len=16).to("tpu")
        dtypes = set()
        model.head.register_forward_hook(lambda m, i, o: dtypes.add(o.dtype))
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(0)
        losses = []
        for _ in range(8):
            x, y = data.batch(4, 16, gen)
            with torch.autocast("tpu", dtype=torch.bfloat16, enabled=autocast):
                loss = model(x.to("tpu"), y.to("tpu"))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, dtypes

    fp32, fp32_dtypes = curve(False)
    bf16, bf16_dtypes = curve(True)
    assert fp32_dtypes == {torch.float32} and bf16_dtypes == {torch.bfloat16}
    assert bf16[-1] < bf16[0] - 0.3
    for a, b in zip(bf16, fp32):
        assert abs(a - b) / b < 0.02, (bf16, fp32)

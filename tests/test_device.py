"""The tpu device as PyTorch sees it: registration, transfers, printing, the
device module (torch.tpu), dtypes, device checks, plugin errors, save/load."""
import io
import os
import subprocess
import sys

import pytest
import torch

import torchtpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, **env):
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, cwd=ROOT,
                          timeout=300)


def test_device_registered():
    d = torch.device("tpu")
    assert d.type == "tpu"
    assert torchtpu.get_device() == torch.device("tpu", 0)
    assert torchtpu.get_device(0) == torch.device("tpu:0")
    assert torchtpu.platform() == "cpu"


def test_to_and_back():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for t in (x.to("tpu"), x.tpu(), x.to(torchtpu.get_device()), x.to(torch.device("tpu:0"))):
        assert t.device == torch.device("tpu", 0)
        assert t.is_tpu and not x.is_tpu
        assert t.shape == x.shape and t.dtype == x.dtype
        back = t.cpu()
        assert back.device.type == "cpu"
        assert torch.equal(back, x)
    assert torch.equal(x.to("tpu").to("cpu"), x)


@pytest.mark.parametrize("case", ["same", "other_dtype", "strided_dst", "transposed_src", "broadcast", "view_src",
                                  "empty", "scalar"])
def test_copy_into_cpu_tensor(case):
    """copy_ from the device into an existing CPU tensor (read straight into it
    when laid out alike, else through a copy) matches the CPU's copy_."""
    src = torch.arange(24, dtype=torch.float32).reshape(4, 6) - 7.5
    dst = torch.full((4, 6), -1.0)
    if case == "other_dtype":
        dst = torch.zeros(4, 6, dtype=torch.int64)
    elif case == "strided_dst":
        dst = torch.zeros(6, 4).t()
    elif case == "transposed_src":
        src, dst = src.t(), torch.zeros(6, 4)
    elif case == "broadcast":
        src = src[:1]
    elif case == "view_src":
        src, dst = src[1:3, ::2], torch.zeros(2, 3)
    elif case == "empty":
        src, dst = src[:0], torch.zeros(0, 6)
    elif case == "scalar":
        src, dst = src[1, 2], torch.zeros(())
    want = dst.clone().copy_(src)
    dev = src.to("tpu") if case not in ("transposed_src", "view_src") else None
    if dev is None:  # the device tensor is the same view of a device base
        base = (torch.arange(24, dtype=torch.float32).reshape(4, 6) - 7.5).to("tpu")
        dev = base.t() if case == "transposed_src" else base[1:3, ::2]
    out = dst.copy_(dev)
    assert out is dst
    torch.testing.assert_close(dst, want, rtol=0, atol=0)


def test_factory_on_device():
    t = torch.ones(2, 3, device="tpu")
    assert t.device.type == "tpu"
    assert torch.equal(t.cpu(), torch.ones(2, 3))
    z = torch.zeros(4, dtype=torch.int32, device="tpu")
    assert torch.equal(z.cpu(), torch.zeros(4, dtype=torch.int32))


def test_item_and_tolist():
    x = torch.tensor([[1.5, -2.0], [3.25, 4.0]])
    t = x.to("tpu")
    assert t[1, 0].item() == 3.25
    assert t.sum().item() == 6.75
    assert torch.tensor(7, dtype=torch.int64).to("tpu").item() == 7
    assert t.tolist() == [[1.5, -2.0], [3.25, 4.0]]
    assert torch.tensor([True, False]).to("tpu").tolist() == [True, False]


def test_print_and_repr(capsys):
    x = torch.tensor([[1.0, 2.5], [-3.0, 4.0]])
    t = x.to("tpu")
    r = repr(t)
    assert "device='tpu:0'" in r
    assert r == repr(x)[:-1] + ", device='tpu:0')"
    print(t)
    assert capsys.readouterr().out.strip() == r
    w = torch.tensor([1.0, 2.0], device="tpu", requires_grad=True)
    y = w * 3
    ry = repr(y)
    assert "grad_fn=<MulBackward0>" in ry and "device='tpu:0'" in ry
    assert "3., 6." in ry
    assert "dtype=torch.int32" in repr(torch.tensor([1, 2], dtype=torch.int32).to("tpu"))


def test_device_module():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(0)
    torch.tpu.set_device("tpu:0")
    assert torch.tpu.current_device() == 0
    with pytest.raises(RuntimeError, match="out of range"):
        torch.tpu.set_device(torch.tpu.device_count())
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
    with torch.tpu.device("tpu:0"):
        assert torch.ones(1, device="tpu").device == torch.device("tpu:0")
    t = torch.ones(3, device="tpu") * 2
    torch.tpu.synchronize()
    torchtpu.synchronize()
    assert torch.equal(t.cpu(), torch.full((3,), 2.0))


def test_manual_seed_reproduces():
    torch.tpu.manual_seed(1234)
    a = torch.rand(100, device="tpu").cpu()
    b = torch.rand(100, device="tpu").cpu()
    torch.tpu.manual_seed(1234)
    a2 = torch.rand(100, device="tpu").cpu()
    assert torch.equal(a, a2)
    assert not torch.equal(a, b)
    assert ((a >= 0) & (a < 1)).all()
    torch.tpu.manual_seed_all(1234)
    assert torch.equal(torch.rand(100, device="tpu").cpu(), a)
    torch.tpu.manual_seed(4321)
    assert not torch.equal(torch.rand(100, device="tpu").cpu(), a)


def test_rng_state_restore():
    torch.tpu.manual_seed(7)
    torch.rand(10, device="tpu")
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = torch.rand(3, 4, device="tpu").cpu()
    second = torch.rand(3, 4, device="tpu").cpu()
    assert not torch.equal(first, second)
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(3, 4, device="tpu").cpu(), first)
    assert torch.equal(torch.rand(3, 4, device="tpu").cpu(), second)


def test_rng_state_follows_the_current_device():
    """get_rng_state/set_rng_state without a device act on the current device, as on CUDA (DTensor's
    random tracker calls them so): each device keeps its own stream."""
    code = """
import torch, torchtpu
torch.tpu.manual_seed_all(3)
zero = torch.tpu.get_rng_state(0)
torch.tpu.set_device(1)
first = torch.rand(5, device="tpu:1").cpu()
assert torch.equal(torch.tpu.get_rng_state(), torch.tpu.get_rng_state(1))
assert torch.equal(torch.tpu.get_rng_state("tpu"), torch.tpu.get_rng_state(torch.device("tpu:1")))
assert torch.equal(torch.tpu.get_rng_state(0), zero)  # tpu:0's generator did not move
assert not torch.equal(torch.tpu.get_rng_state(), zero)
torch.tpu.set_rng_state(zero)  # rewinds tpu:1's generator, not tpu:0's
assert torch.equal(torch.rand(5, device="tpu").cpu(), first)
torch.tpu.set_rng_state(torch.tpu.get_rng_state(1), device="tpu:0")
assert torch.equal(torch.tpu.get_rng_state(0), torch.tpu.get_rng_state(1))
with torch.random.fork_rng(devices=[1], device_type="tpu"):
    torch.tpu.set_rng_state(zero)
    torch.rand(3, device="tpu")
assert torch.equal(torch.tpu.get_rng_state(0), torch.tpu.get_rng_state(1))
with torch.tpu.device(0):
    assert torch.equal(torch.tpu.get_rng_state(), torch.tpu.get_rng_state(0))
    assert torch.tpu.current_device() == 0
try:
    torch.tpu.get_rng_state("cpu")
    raise SystemExit("a cpu device was accepted")
except ValueError as e:
    assert "expected a tpu device" in str(e)
print("OK")
"""
    r = run_python(code, TORCHTPU_CPU_DEVICES="2")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8,
          torch.bool, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtype_round_trip(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        x = torch.rand(5, 7, generator=g) > 0.5
    elif dtype.is_floating_point:
        x = (torch.randn(5, 7, generator=g, dtype=torch.float64) * 1000).to(dtype)
        x[0, :3] = torch.tensor([float("inf"), float("-inf"), -0.0], dtype=dtype)
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (5, 7), generator=g, dtype=torch.int64).to(dtype)
        x[0, 0], x[0, 1] = info.min, info.max
    t = x.to("tpu")
    assert t.dtype == dtype
    back = t.cpu()
    assert back.dtype == dtype
    assert torch.equal(back.view(torch.uint8) if dtype != torch.bool else back,
                       x.view(torch.uint8) if dtype != torch.bool else x)  # bit-exact, -0.0 included
    if dtype.is_floating_point:
        nan = torch.tensor([float("nan")], dtype=dtype).to("tpu").cpu()
        assert torch.isnan(nan).all()


def test_mixed_devices_raise():
    t = torch.ones(3, device="tpu")
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        t + c
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        c * t
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device="tpu"), torch.ones(2, 2))


def test_cpu_scalar_tensor_with_tpu_tensor():
    x = torch.tensor([1.0, 2.0, 3.0])
    s = torch.tensor(2.5)
    t = x.to("tpu")
    r = t * s
    assert r.device.type == "tpu"
    assert torch.equal(r.cpu(), x * s)
    assert torch.equal((s + t).cpu(), s + x)
    t.add_(s)
    assert torch.equal(t.cpu(), x + 2.5)


def test_missing_plugin_message():
    r = run_python("import torchtpu", TORCHTPU_PJRT_PLUGIN="/nonexistent.so")
    assert r.returncode != 0
    assert "ImportError" in r.stderr
    assert "pip install xla-cpu-pjrt" in r.stderr
    assert "/nonexistent.so" in r.stderr


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_save_load(dtype):
    x = (torch.randn(4, 6, generator=torch.Generator().manual_seed(1)) * 10).to(dtype)
    t = x.to("tpu")
    buf = io.BytesIO()
    torch.save({"whole": t, "view": t[1:3, 2:]}, buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["whole"].device.type == "cpu" and on_cpu["whole"].dtype == dtype
    assert torch.equal(on_cpu["whole"], x)
    assert torch.equal(on_cpu["view"], x[1:3, 2:])
    buf.seek(0)
    on_tpu = torch.load(buf)
    assert on_tpu["whole"].device == torch.device("tpu:0")
    assert torch.equal(on_tpu["whole"].cpu(), x)
    assert torch.equal(on_tpu["view"].cpu(), x[1:3, 2:])
    # The loaded views still share one storage, as saved.
    on_tpu["view"].zero_()
    expect = x.clone()
    expect[1:3, 2:] = 0
    assert torch.equal(on_tpu["whole"].cpu(), expect)
    if dtype.is_floating_point:
        assert torch.equal((on_tpu["whole"] * 2).cpu(), expect * 2)


def test_env_prints_settings():
    r = subprocess.run([sys.executable, "-m", "torchtpu.env"], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT, TORCHTPU_EAGER_MODE="debug"), timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("TORCHTPU_PJRT_PLUGIN", "TORCHTPU_CPU_DEVICES", "TORCHTPU_EAGER_MODE", "TORCHTPU_CPU_FALLBACK"):
        assert name in r.stdout
    assert "TORCHTPU_EAGER_MODE='debug'" in r.stdout

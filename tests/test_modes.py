"""Eager modes, compile counting through torchtpu.debug.metrics(), the CPU
fallback, and where errors surface."""
import os
import subprocess
import sys
import traceback
import warnings

import pytest
import torch

import torchtpu
from torchtpu import debug

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, **env):
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, cwd=ROOT,
                          timeout=300)


@pytest.fixture(autouse=True)
def restore_mode():
    previous = torchtpu.get_eager_mode()
    yield
    torchtpu.set_eager_mode(previous)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---- modes ------------------------------------------------------------------

def test_set_and_get_mode():
    torchtpu.set_eager_mode("debug")
    assert torchtpu.get_eager_mode() == "debug"
    torchtpu.set_eager_mode("strict")
    assert torchtpu.get_eager_mode() == "strict"
    with pytest.raises(ValueError, match="fused-ish"):
        torchtpu.set_eager_mode("fused-ish")
    assert torchtpu.get_eager_mode() == "strict"


def test_mode_context_manager_restores():
    torchtpu.set_eager_mode("strict")
    with torchtpu.eager_mode("debug"):
        assert torchtpu.get_eager_mode() == "debug"
        with torchtpu.eager_mode("strict"):
            assert torchtpu.get_eager_mode() == "strict"
        assert torchtpu.get_eager_mode() == "debug"
    assert torchtpu.get_eager_mode() == "strict"
    with pytest.raises(KeyError):
        with torchtpu.eager_mode("debug"):
            raise KeyError("boom")
    assert torchtpu.get_eager_mode() == "strict"
    torchtpu.set_eager_mode("debug")
    with torchtpu.eager_mode("strict"):
        assert torchtpu.get_eager_mode() == "strict"
    assert torchtpu.get_eager_mode() == "debug"


@pytest.mark.parametrize("mode", ["debug", "strict"])
def test_env_var_selects_mode(mode):
    r = run_python("import torchtpu; print(torchtpu.get_eager_mode())", TORCHTPU_EAGER_MODE=mode)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == mode


def test_env_var_default_is_strict():
    env = {k: v for k, v in os.environ.items() if k != "TORCHTPU_EAGER_MODE"}
    env["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, "-c", "import torchtpu; print(torchtpu.get_eager_mode())"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "strict"


def test_env_var_bad_mode():
    r = run_python("import torchtpu", TORCHTPU_EAGER_MODE="bogus")
    assert r.returncode != 0
    assert "ValueError: torchtpu: invalid setting: TORCHTPU_EAGER_MODE='bogus' is not valid" in r.stderr


def compute(x, w):
    h = torch.relu(x @ w + 0.5)
    y = torch.softmax(h, dim=-1) * 3.0 - h.mean(0)
    y[1:3].mul_(2)
    return y, y.sum(), h.amax(1)


def test_modes_give_identical_results():
    x, w = rand(6, 5, seed=1), rand(5, 4, seed=2)
    results = {}
    for mode in ("debug", "strict"):
        with torchtpu.eager_mode(mode):
            results[mode] = [t.cpu() for t in compute(x.to("tpu"), w.to("tpu"))]
    for d, s, c in zip(results["debug"], results["strict"], compute(x, w)):
        assert torch.equal(d, s)
        torch.testing.assert_close(d, c, rtol=1e-5, atol=1e-5)


def test_synchronize():
    for mode in ("debug", "strict"):
        torchtpu.set_eager_mode(mode)
        x = torch.ones(64, 64, device="tpu")
        for _ in range(5):
            x = x @ x * (1 / 64)
        torchtpu.synchronize()
        torch.tpu.synchronize()
        assert torch.equal(x.cpu(), torch.ones(64, 64))


# ---- metrics and compile counting -------------------------------------------

KEYS = ("compilations", "compile_seconds", "executions", "cache_hits", "cache_misses", "ops", "cpu_fallbacks",
        "h2d_bytes", "d2h_bytes")


def test_metrics_keys_and_reset():
    torch.ones(3, device="tpu").add(1).cpu()
    m = debug.metrics()
    for k in KEYS:
        assert k in m
    assert isinstance(m["ops"], dict) and isinstance(m["cpu_fallbacks"], dict)
    assert isinstance(m["compile_seconds"], float)
    debug.reset_metrics()
    m = debug.metrics()
    for k in KEYS:
        assert m[k] in (0, 0.0, {}), (k, m[k])


def test_same_op_twice_compiles_once():
    a, b = rand(17, 29, seed=3).to("tpu"), rand(17, 29, seed=4).to("tpu")
    debug.reset_metrics()
    c1 = a + b
    m = debug.metrics()
    assert m["compilations"] == 1 and m["cache_misses"] == 1 and m["cache_hits"] == 0
    assert m["executions"] == 1
    assert m["compile_seconds"] > 0
    assert m["ops"] == {"aten::add.Tensor": 1}
    c2 = a + b
    m = debug.metrics()
    assert m["compilations"] == 1 and m["cache_misses"] == 1 and m["cache_hits"] == 1
    assert m["executions"] == 2
    assert m["ops"]["aten::add.Tensor"] == 2
    assert torch.equal(c1.cpu(), c2.cpu())
    assert torch.equal(c1.cpu(), rand(17, 29, seed=3) + rand(17, 29, seed=4))


def test_new_python_scalar_does_not_recompile():
    a = rand(13, 31, seed=5).to("tpu")
    debug.reset_metrics()
    r1 = a * 2.5
    first = debug.metrics()["compilations"]
    assert first == 1
    results = [(s, a * s) for s in (3.75, -1.0, 1e-3, 7.0)]
    m = debug.metrics()
    assert m["compilations"] == first
    assert m["cache_hits"] == 4
    assert m["executions"] == 5
    cpu = rand(13, 31, seed=5)
    assert torch.equal(r1.cpu(), cpu * 2.5)
    for s, r in results:
        assert torch.equal(r.cpu(), cpu * s)


def test_new_shape_compiles_again():
    a = rand(11, 23, seed=6).to("tpu")
    debug.reset_metrics()
    a.exp()
    a.exp()
    assert debug.metrics()["compilations"] == 1
    b = rand(23, 11, seed=7).to("tpu")
    r = b.exp()
    m = debug.metrics()
    assert m["compilations"] == 2 and m["cache_hits"] == 1
    torch.testing.assert_close(r.cpu(), rand(23, 11, seed=7).exp())
    a.to(torch.float64).exp()  # a new dtype is structure too
    assert debug.metrics()["compilations"] >= 3


def test_ops_counted_by_overload_name():
    a = rand(3, 3).to("tpu")
    debug.reset_metrics()
    a * 2.0
    a.mul_(a)
    assert debug.metrics()["ops"] == {"aten::mul.Tensor": 1, "aten::mul_.Tensor": 1}


def test_transfer_bytes():
    x = rand(10, 10, seed=8)
    debug.reset_metrics()
    t = x.to("tpu")
    assert debug.metrics()["h2d_bytes"] == 400
    assert debug.metrics()["d2h_bytes"] == 0
    assert torch.equal(t.cpu(), x)
    assert debug.metrics()["d2h_bytes"] == 400


def test_metrics_report():
    a = rand(4, 4).to("tpu")
    debug.reset_metrics()
    (a + a).cpu()
    text = debug.metrics_report()
    assert isinstance(text, str)
    for k in ("compilations", "cache_hits", "executions", "cpu_fallbacks", "aten::add.Tensor"):
        assert k in text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("compilations"))
    assert line.split()[1] == str(debug.metrics()["compilations"])


# ---- CPU fallback -------------------------------------------------------------
# aten::linalg_eig (eigenvalues and eigenvectors of a general matrix) and
# aten::bincount have no tpu lowering: they stand for any op without one.

def test_fallback_correct_and_counted():
    a = rand(4, 4, seed=9)
    idx = torch.tensor([0, 3, 3, 1, 3])
    t = a.to("tpu")
    debug.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vals, vecs = torch.linalg.eig(t)
        vals2, _ = torch.linalg.eig(t * 2)
        counts = torch.bincount(idx.to("tpu"))
    assert vals.device.type == "tpu" and vecs.device.type == "tpu" and counts.device.type == "tpu"
    ref_vals, ref_vecs = torch.linalg.eig(a)
    torch.testing.assert_close(vals.cpu(), ref_vals)
    torch.testing.assert_close(vecs.cpu(), ref_vecs)
    torch.testing.assert_close(vals2.cpu(), torch.linalg.eig(a * 2)[0])
    assert torch.equal(counts.cpu(), torch.bincount(idx))
    fb = debug.metrics()["cpu_fallbacks"]
    assert fb == {"aten::linalg_eig": 2, "aten::bincount": 1}
    # The result is a normal device tensor that lowered ops consume.
    torch.testing.assert_close((vecs * 2).cpu(), ref_vecs * 2)


def test_fallback_warns_once():
    # A fresh process: the once-per-op warning is process-wide.
    code = """
import warnings, pytest, torch, torchtpu
t = (torch.eye(3) * 2).to("tpu")
with pytest.warns(UserWarning, match="aten::linalg_eig.*no tpu lowering"):
    a = torch.linalg.eig(t).eigenvalues
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    b = torch.linalg.eig(t).eigenvalues
assert not [x for x in w if "eig" in str(x.message)], [str(x.message) for x in w]
ref = torch.linalg.eig(torch.eye(3) * 2).eigenvalues
assert torch.allclose(a.cpu(), ref) and torch.equal(b.cpu(), a.cpu())
print("ok", torchtpu.debug.metrics()["cpu_fallbacks"])
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "ok {'aten::linalg_eig': 2}"


def test_fallback_error_setting():
    code = """
import torch, torchtpu
try:
    torch.linalg.eig(torch.eye(3, device="tpu"))
except NotImplementedError as e:
    print("raised:", e)
"""
    r = run_python(code, TORCHTPU_CPU_FALLBACK="error")
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith("raised:") and "aten::linalg_eig" in out and "TORCHTPU_CPU_FALLBACK" in out


# ---- errors ---------------------------------------------------------------------

def last_user_frame(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__]
    return frames[-1]


@pytest.mark.parametrize("mode", ["debug", "strict"])
def test_shape_error_raised_at_the_op(mode):
    torchtpu.set_eager_mode(mode)
    a, b = torch.ones(3, device="tpu"), torch.ones(4, device="tpu")
    line = sys._getframe().f_lineno + 2
    with pytest.raises(RuntimeError) as info:
        a + b
    msg = str(info.value)
    assert "[3]" in msg and "[4]" in msg
    frame = last_user_frame(info.value)
    assert frame.name == "test_shape_error_raised_at_the_op" and frame.lineno == line
    line = sys._getframe().f_lineno + 2
    with pytest.raises(RuntimeError) as info:
        torch.mm(torch.ones(3, 2, device="tpu"), torch.ones(3, 2, device="tpu"))
    assert "3x2" in str(info.value)
    assert last_user_frame(info.value).lineno == line
    # The device is still usable after the error.
    assert torch.equal((a + a).cpu(), torch.full((3,), 2.0))


def test_shape_error_names_the_op():
    torchtpu.set_eager_mode("debug")
    with pytest.raises(RuntimeError, match=r"aten::add.*\[3\].*\[4\]"):
        torch.ones(3, device="tpu") + torch.ones(4, device="tpu")

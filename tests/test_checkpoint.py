"""Checkpoints of tpu tensors: torch.save of model and optimizer state loads
in a process where torchtpu cannot be imported (map_location="cpu"), back on
tpu (map_location="tpu" or none), keeps views sharing their storage, and
reads back only the bytes it writes; safetensors saves and loads tpu state
dicts, tied weights included. Every value is compared with the CPU copy."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torchtpu
from torchtpu import debug

pytestmark = pytest.mark.usefixtures("each_mode")


def trained_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3)).to("tpu")
    model[2].to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(2):
        out = model[2](model[1](model[0](torch.randn(4, 6).to("tpu"))).bfloat16())
        out.float().sum().backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def cpu_copy(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(cpu_copy(v) for v in obj)
    return obj


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b


def test_save_loads_without_torchtpu(tmp_path):
    model, opt = trained_state()
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": 2}
    want = cpu_copy(state)
    path, out = tmp_path / "ck.pt", tmp_path / "cpu.pt"
    torch.save(state, path)
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torchtpu":
                    raise ImportError("torchtpu is not installed here")
        sys.meta_path.insert(0, Block())
        import torch
        state = torch.load({str(path)!r}, map_location="cpu")
        assert "torchtpu" not in sys.modules
        for t in state["model"].values():
            assert t.device.type == "cpu"
        torch.save(state, {str(out)!r})
    """)
    # A process where torchtpu is not installed: no torch device autoload either.
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert_same(torch.load(out), want)


@pytest.mark.parametrize("where", ["tpu", None, "tpu:0"])
def test_load_back_on_tpu(tmp_path, where):
    model, opt = trained_state()
    want = cpu_copy({"model": model.state_dict(), "opt": opt.state_dict()})
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.pt")
    got = torch.load(tmp_path / "ck.pt", map_location=where)
    assert got["model"]["0.weight"].device.type == "tpu"
    assert got["opt"]["state"][0]["exp_avg"].device.type == "tpu"
    assert_same(got, want)
    fresh = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3)).to("tpu")
    fresh[2].to(torch.bfloat16)
    fresh.load_state_dict(got["model"])
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    fresh_opt.load_state_dict(got["opt"])
    assert_same(cpu_copy(fresh.state_dict()), want["model"])


def test_views_keep_sharing(tmp_path):
    base = torch.arange(12.0).to("tpu")
    torch.save({"base": base, "view": base[2:8].view(2, 3), "t": base.view(3, 4).t()}, tmp_path / "v.pt")
    got = torch.load(tmp_path / "v.pt", map_location="tpu")
    got["base"].add_(100)
    torch.testing.assert_close(got["view"].cpu(), (torch.arange(12.0) + 100)[2:8].view(2, 3))
    torch.testing.assert_close(got["t"].cpu(), (torch.arange(12.0) + 100).view(3, 4).t())


def test_save_reads_only_what_it_writes(tmp_path):
    model, opt = trained_state()
    state = {"model": model.state_dict(), "opt": opt.state_dict()}
    torchtpu.synchronize()
    storages = {}
    for t in [*state["model"].values(), *(v for s in state["opt"]["state"].values() for v in s.values())]:
        if isinstance(t, torch.Tensor) and t.device.type == "tpu":
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    debug.reset_metrics()
    torch.save(state, tmp_path / "ck.pt")
    m = debug.metrics()
    assert m["d2h_bytes"] == sum(storages.values())
    assert m["compilations"] == 0 and m["cpu_fallbacks"] == {}


def test_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.torch", reason="safetensors is not installed")
    model, _ = trained_state()
    want = cpu_copy(model.state_dict())
    st.save_file(model.state_dict(), tmp_path / "m.safetensors")
    assert_same(st.load_file(tmp_path / "m.safetensors"), want)
    fresh = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3)).to("tpu")
    fresh[2].to(torch.bfloat16)
    missing, unexpected = st.load_model(fresh, tmp_path / "m.safetensors")
    assert not missing and not unexpected
    assert fresh[0].weight.device.type == "tpu"
    assert_same(cpu_copy(fresh.state_dict()), want)


def test_safetensors_tied_weights(tmp_path):
    st = pytest.importorskip("safetensors.torch", reason="safetensors is not installed")

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(7, 4)
            self.head = torch.nn.Linear(4, 7, bias=False)
            self.head.weight = self.emb.weight

    torch.manual_seed(0)
    model = Tied().to("tpu")
    with pytest.raises(RuntimeError, match="share memory"):  # as on any device: save_model handles ties
        st.save_file(model.state_dict(), tmp_path / "t.safetensors")
    st.save_model(model, tmp_path / "t.safetensors")
    fresh = Tied().to("tpu")
    st.load_model(fresh, tmp_path / "t.safetensors")
    assert fresh.head.weight is fresh.emb.weight
    torch.testing.assert_close(fresh.emb.weight.cpu(), model.emb.weight.cpu(), rtol=0, atol=0)

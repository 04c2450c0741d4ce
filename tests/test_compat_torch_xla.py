"""torchtpu.compat: PyTorch/XLA's common API on torchtpu. Each shim against
its torchtpu equivalent, the errors for what has no counterpart, and a
script written the PyTorch/XLA way trained on 1 and 2 processes against the
CPU's losses."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torchtpu
import torchtpu.compat

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "compat", "xla_style_train.py")

torchtpu.compat.install()
import torch_xla  # noqa: E402
import torch_xla.amp  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.distributed.parallel_loader as pl  # noqa: E402
import torch_xla.distributed.xla_backend  # noqa: E402,F401
import torch_xla.distributed.xla_multiprocessing as xmp  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402


def test_modules_resolve_to_torchtpu():
    assert torchtpu.compat.installed()
    assert xm.xla_device() == torchtpu.get_device() == torch_xla.device()
    assert torch_xla.devices() == [torch.device("tpu", i) for i in range(torch.tpu.device_count())]
    assert torch_xla.device_count() == torch.tpu.device_count()
    assert xm.get_xla_supported_devices() == [f"tpu:{i}" for i in range(torch.tpu.device_count())]
    assert xm.xla_device_hw(xm.xla_device()) == torchtpu.platform().upper() == xr.device_type()
    assert xmp.spawn is torchtpu.compat.torch_xla.spawn
    torchtpu.compat.install()  # idempotent


def test_single_process_ordinals():
    assert (xm.get_ordinal(), xm.get_local_ordinal(), xm.xrt_world_size(), xr.world_size()) == (0, 0, 1, 1)
    assert xm.is_master_ordinal() and xm.is_master_ordinal(local=False)
    assert (xr.global_ordinal(), xr.local_ordinal(), xr.process_count(), xr.is_spmd()) == (0, 0, 1, False)
    assert xm.rendezvous("tag", b"payload") == [b"payload"]


def test_mark_step_runs_pending_work_and_closures():
    seen = []
    x = torch.arange(6.0, device="tpu")
    with torchtpu.eager_mode("fused"):
        y = x * 2 + 1
        xm.add_step_closure(lambda t: seen.append(t.cpu().tolist()), args=(y,))
        assert seen == []
        xm.mark_step()
        assert seen == [[1.0, 3.0, 5.0, 7.0, 9.0, 11.0]]
        with torch_xla.step():
            z = y - 1
        torch_xla.sync(wait=True)
        xm.wait_device_ops()
    assert torch.equal(z.cpu(), torch.arange(6.0) * 2)


def test_all_reduce_on_one_process_scales():
    t = torch.tensor([1.0, -2.0], device="tpu")
    out = xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5)
    assert torch.equal(out.cpu(), torch.tensor([0.5, -1.0])) and torch.equal(t.cpu(), torch.tensor([1.0, -2.0]))
    ts = [torch.ones(3, device="tpu"), torch.full((2,), 4.0, device="tpu")]
    assert xm.all_reduce(xm.REDUCE_MAX, ts, scale=2.0) is ts
    assert ts[0].cpu().tolist() == [2.0] * 3 and ts[1].cpu().tolist() == [8.0] * 2
    assert torch.equal(xm.all_gather(t).cpu(), t.cpu())
    with pytest.raises(ValueError, match="unknown reduce_type"):
        xm.all_reduce("avg", t)
    with pytest.raises(NotImplementedError, match="new_group"):
        xm.all_reduce(xm.REDUCE_SUM, t, groups=[[0, 1]])


def test_optimizer_step_matches_step_on_one_process():
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3)
    model = torch.nn.Linear(4, 3).to("tpu")
    model.load_state_dict(ref.state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (ref, model)]
    x = torch.randn(5, 4)
    for _ in range(3):
        for m, opt, inp in ((ref, opts[0], x), (model, opts[1], x.to("tpu"))):
            opt.zero_grad()
            m(inp).square().mean().backward()
        opts[0].step()
        xm.optimizer_step(opts[1], barrier=True)
    torch.testing.assert_close(model.weight.cpu(), ref.weight, rtol=1e-6, atol=1e-6)


def test_save_writes_cpu_tensors(tmp_path):
    state = {"w": torch.arange(3.0, device="tpu"), "nested": [torch.ones(2, device="tpu"), 5], "step": 7}
    path = tmp_path / "ckpt.pt"
    xm.save(state, str(path))
    # Loads on the CPU with no map_location, as PyTorch/XLA's checkpoints do.
    loaded = torch.load(path, weights_only=True)
    assert loaded["w"].device.type == "cpu" and loaded["w"].tolist() == [0.0, 1.0, 2.0]
    assert loaded["nested"][0].device.type == "cpu" and loaded["nested"][1] == 5 and loaded["step"] == 7


def test_device_loader_and_amp():
    data = [(torch.full((2, 3), float(i)), torch.tensor([i, i])) for i in range(4)]
    batches = list(pl.MpDeviceLoader(data, xm.xla_device()))
    assert len(batches) == 4
    for i, (x, y) in enumerate(batches):
        assert x.device.type == "tpu" and torch.equal(x.cpu(), data[i][0]) and torch.equal(y.cpu(), data[i][1])
    per_device = pl.ParallelLoader(data, [xm.xla_device()]).per_device_loader(xm.xla_device())
    assert len(list(per_device)) == 4
    w = torch.randn(3, 3, device="tpu")
    with torch_xla.amp.autocast(xm.xla_device()):
        assert (w @ w).dtype == torch.bfloat16


def test_metrics():
    met.clear_all()
    (torch.ones(2, device="tpu") + 1).cpu()
    assert "compilations" in met.counter_names() and met.counter_value("executions") >= 1
    assert met.metrics_report() == torchtpu.debug.metrics_report()
    assert met.metric_names() == [] and met.metric_data("x") is None


def test_missing_names_and_modules_name_the_torchtpu_way():
    with pytest.raises(AttributeError, match="torch_xla.core.xla_model.send_cpu_data_to_device has no torchtpu"):
        xm.send_cpu_data_to_device
    with pytest.raises(ModuleNotFoundError, match="No module named .torch_xla.experimental.: torchtpu.s torch_xla shims do not include it"):
        import torch_xla.experimental.pjrt  # noqa: F401
    with pytest.raises(NotImplementedError, match="DTensor"):
        xr.use_spmd()
    with pytest.raises(NotImplementedError, match="TORCHTPU_CACHE_DIR"):
        xr.initialize_cache("/tmp/x")


def test_xla_backend_name_is_tpu_dist():
    import torch.distributed as dist
    assert "xla" in dist.Backend.backend_list


def _cpu_reference(world):
    """The script's losses per rank, computed on the CPU: averaged gradients
    over `world` equal batches are the gradient of the mean over their union."""
    sys.path.insert(0, os.path.dirname(SCRIPT))
    try:
        import xla_style_train as script
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    model = script.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = script.dataset()
    order = [list(range(r, len(data), world)) for r in range(world)]
    losses = [[] for _ in range(world)]
    for step in range(script.STEPS):
        opt.zero_grad()
        total = 0
        for r in range(world):
            idx = order[r][step * script.BATCH:(step + 1) * script.BATCH]
            x = torch.stack([data[i][0] for i in idx])
            y = torch.stack([data[i][1] for i in idx])
            loss = F.nll_loss(model(x), y)
            losses[r].append(loss.item())
            total = total + loss / world
        total.backward()
        opt.step()
    return losses, model.state_dict()


@pytest.mark.parametrize("world,ddp", [(1, False), (2, False), (2, True)])
def test_pytorch_xla_script_trains_like_the_cpu(tmp_path, world, ddp):
    out = str(tmp_path / "run")
    env = dict(os.environ, TORCHTPU_CPU_DEVICES=str(world))
    env.pop("TORCHTPU_TORCH_XLA", None)
    r = subprocess.run([sys.executable, "-m", "torchtpu.compat", SCRIPT, out] + (["--ddp"] if ddp else []), env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"trained 6 steps on {world} process(es)" in r.stdout
    expected, state = _cpu_reference(world)
    for rank in range(world):
        with open(f"{out}.rank{rank}.json") as f:
            got = json.load(f)
        torch.testing.assert_close(torch.tensor(got), torch.tensor(expected[rank]), rtol=1e-4, atol=1e-5)
    saved = torch.load(f"{out}.model.pt", weights_only=True)
    for k, v in state.items():
        torch.testing.assert_close(saved[k], v, rtol=1e-4, atol=1e-5)

"""Debugging that explains itself: the user lines that reached sync points
and CPU fallbacks (with what made them one), TORCHTPU_DEBUG=syncs, the
NaN/Inf check of op outputs, errors of device work nothing read reported at
exit, and the report that gathers them."""
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import torchtpu
from torchtpu import debug


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THIS = os.path.basename(__file__)


def _line_of(marker):
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if marker in line and "_line_of" not in line:
                return i
    raise AssertionError(marker)


def _run(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, cwd=ROOT, timeout=300)


def test_sync_points_name_the_line_and_cause(each_mode):
    x = torch.arange(6.0, device="tpu")
    debug.reset_metrics()
    for _ in range(3):
        y = x * 2
        y.sum().item()  # SYNC-ITEM
    y.cpu()  # SYNC-CPU
    if (y > 3).any():  # SYNC-IF
        pass
    syncs = debug.sync_points()
    where = {(s["site"].split(" in ")[0], s["op"]): s for s in syncs}
    item = where[(f"{__file__}:{_line_of('SYNC-ITEM')}", "aten::_local_scalar_dense")]
    assert item["count"] == 3 and ".item()" in item["cause"]
    assert where[(f"{__file__}:{_line_of('SYNC-CPU')}", "aten::_copy_from")]["count"] == 1
    assert where[(f"{__file__}:{_line_of('SYNC-IF')}", "aten::_local_scalar_dense")]["count"] == 1
    assert syncs[0] is item  # most frequent first
    report = debug.metrics_report()
    assert f"sync_points          {sum(s['count'] for s in syncs)}" in report
    assert f"{THIS}:{_line_of('SYNC-ITEM')}" in report
    debug.reset_metrics()
    assert debug.sync_points() == []


def test_device_side_check_reads_are_not_user_syncs():
    emb = torch.nn.Embedding(10, 3).to("tpu")
    idx = torch.tensor([1, 2], device="tpu")
    debug.reset_metrics()
    emb(idx).sum().item()  # one sync: the embedding's index check is read with it
    assert [s["count"] for s in debug.sync_points()] == [1]


def test_fallback_sites_and_warning_name_the_user_line():
    code = """
        import warnings, torch, torchtpu
        from torchtpu import debug
        a = torch.eye(3, device="tpu") * 2
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as w:
            for _ in range(2):
                torch.linalg.eig(a)
        print([str(x.message) for x in w if "no tpu lowering" in str(x.message)][0])
        for s in debug.fallback_sites():
            print(s["op"], s["site"], s["count"])
        print(debug.metrics_report())
    """
    r = _run(code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "first reached from <string>:8" in lines[0] and "metrics_report() lists the lines" in lines[0]
    assert "aten::linalg_eig <string>:8 in <module> 2" in lines
    report = r.stdout[r.stdout.index("torchtpu metrics"):]
    assert re.search(r"\n    aten::linalg_eig +2\n      <string>:8 in <module> +2\n", report), report
    # The fallback's copies are its sync points, named as such.
    assert "the CPU fallback of an op with no tpu lowering [aten::linalg_eig (CPU fallback)]" \
        in report and "[aten::_copy_from]" not in report


def test_debug_syncs_prints_each_sync_as_it_happens():
    code = """
        import torch, torchtpu
        x = torch.ones(4, device="tpu")
        print("before", flush=True)
        v = (x * 3).sum().item()
        print("after", v, flush=True)
    """
    r = _run(code, TORCHTPU_DEBUG="syncs")
    assert r.returncode == 0, r.stderr
    assert "torchtpu: sync point: aten::_local_scalar_dense at <string>:5 in <module>" in r.stderr
    assert "sync point" not in _run(code).stderr


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_check_nan_raises_at_the_first_op(mode):
    code = f"""
        import torch, torchtpu
        torchtpu.set_eager_mode("{mode}")
        x = torch.tensor([1.0, 0.0, 2.0], device="tpu")
        y = x * 2
        z = torch.log(x)  # -inf at element 1
        print("not reached")
    """
    r = _run(code, TORCHTPU_CHECK_NAN="1")
    assert r.returncode == 1 and "not reached" not in r.stdout
    assert "RuntimeError: aten::log: output 0 holds NaN or Inf (shape [3], Float; TORCHTPU_CHECK_NAN=1) at " \
        "<string>:6" in r.stderr, r.stderr
    ok = _run(code)  # off by default
    assert ok.returncode == 0 and "not reached" in ok.stdout


def test_check_nan_api_and_what_it_leaves_alone():
    x = torch.tensor([1.0, 0.0], device="tpu")
    debug.set_check_nan(True)
    try:
        assert torch.equal((x + 1).cpu(), torch.tensor([2.0, 1.0]))
        assert torch.equal((x == 0).cpu(), torch.tensor([False, True]))  # bool outputs: not checked
        i = torch.tensor([3, 0], device="tpu") // 1  # integers: not checked
        assert i.cpu().tolist() == [3, 0]
        with pytest.raises(RuntimeError, match=r"aten::div.Tensor.*holds NaN or Inf"):
            torch.div(x, x)  # 0/0
        with pytest.raises(RuntimeError, match=r"aten::mul_?.*holds NaN or Inf"):
            x.mul_(float("inf"))
    finally:
        debug.set_check_nan(False)
    assert torch.isnan(torch.div(x, x)).any().item()


def test_an_error_nothing_read_is_reported_at_exit():
    code = """
        import torch, torchtpu
        x = torch.arange(3.0, device="tpu")
        y = x[torch.tensor([5], device="tpu")]
        print("end of script", flush=True)
    """
    for mode in ("strict", "fused"):
        r = _run(code, TORCHTPU_EAGER_MODE=mode)
        assert r.returncode == 1, (mode, r.stdout, r.stderr)
        assert r.stdout == "end of script\n"
        assert "torchtpu: device work failed and nothing read its result" in r.stderr
        assert "aten::index: index out of bounds for dimension 0 with size 3 (issued at <string>:4" in r.stderr, r.stderr
    clean = _run(code.replace("[5]", "[2]"))
    assert clean.returncode == 0 and clean.stderr == ""


def test_exit_handlers_still_run_after_a_lost_error(tmp_path):
    marker = tmp_path / "ran"
    code = f"""
        import atexit, torch, torchtpu
        atexit.register(lambda: open({str(marker)!r}, "w").write("yes"))
        x = torch.arange(3.0, device="tpu")
        y = x[torch.tensor([7], device="tpu")]
    """
    r = _run(code)
    assert r.returncode == 1 and marker.read_text() == "yes"


def test_warnings_point_at_the_user_line():
    code = """
        import warnings, torch, torchtpu
        warnings.simplefilter("always")
        f = torch.compile(lambda x: x * 2 + 1)
        with warnings.catch_warnings(record=True) as w:
            y = f(torch.ones(3, device="tpu"))
        hit = [x for x in w if "Inductor cannot generate code" in str(x.message)]
        print(hit[0].filename, hit[0].lineno, y.cpu().tolist())
    """
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "<string> 6 [3.0, 3.0, 3.0]"


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_errors_quote_the_users_line(mode):
    """A device-side error names the op, the user's line and the line's text as the user
    wrote it (`x[idx]`, not only aten::index), in every mode; a shape error gives the
    mismatched dimension in PyTorch's words."""
    x = torch.ones(3, device="tpu")
    idx = torch.tensor([7], device="tpu")
    with torchtpu.eager_mode(mode):
        with pytest.raises(IndexError) as e:
            y = x[idx] * 2  # the quoted line
            y.cpu()
    msg = str(e.value)
    assert "aten::index" in msg and "index out of bounds" in msg, msg
    assert f"{THIS}:{_line_of('# the quoted line')} in test_errors_quote_the_users_line: y = x[idx] * 2" in msg, msg
    with pytest.raises(RuntimeError) as cpu_error:
        torch.ones(3, 4) + torch.ones(5, 4)
    with torchtpu.eager_mode(mode):
        with pytest.raises(RuntimeError) as tpu_error:
            torch.ones(3, 4, device="tpu") + torch.ones(5, 4, device="tpu")
    assert str(cpu_error.value) in str(tpu_error.value), (str(cpu_error.value), str(tpu_error.value))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_torch_profiler_shows_torchtpu_spans(mode):
    """Under torch.profiler (CPU and PrivateUse1 activities) torchtpu's own spans appear beside
    the ATen ops: the upload, the program's execution on the executor's thread, the sync wait;
    the cache lookup and compilation when a program is compiled; again in a second session."""
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(5, 9)
    with torchtpu.eager_mode(mode):
        for session in range(2):
            before = debug.metrics()["compilations"]
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
                y = (x.to("tpu") * (2.5 + session) + 1).cpu()
                torch.ones(1, device="tpu").cpu()  # a later span hands over the device's
            torch.testing.assert_close(y, x * (2.5 + session) + 1)
            names = {e.name for e in p.events()}
            want = {"torchtpu::execute", "torchtpu::device execution", "torchtpu::sync point",
                    "torchtpu::host->device", "aten::mul"}
            if debug.metrics()["compilations"] > before:  # a program the memory tier did not hold
                want |= {"torchtpu::graph key and cache lookup", "torchtpu::compile"}
            assert want <= names, (session, sorted(want - names))
    # Off once the profiler stopped: nothing is recorded outside a session.
    assert not torch.autograd.profiler._is_profiler_enabled


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_trace_writes_a_timeline(tmp_path, mode):
    import json
    path = tmp_path / "trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(13, 7), torch.nn.Tanh()).to("tpu")  # sizes no other test uses
    x = torch.randn(5, 13)
    with torchtpu.eager_mode(mode), debug.trace(str(path)):
        loss = model(x.to("tpu")).square().mean()
        loss.backward()
        value = loss.item()
    with torchtpu.eager_mode(mode):
        assert value == pytest.approx(model(x.to("tpu")).square().mean().item())
    data = json.loads(path.read_text())
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    cats = {e["cat"] for e in spans}
    assert {"op", "cache", "execute", "device", "sync", "transfer"} <= cats, cats
    assert "fused" in cats if mode == "fused" else "fused" not in cats
    names = {e["name"] for e in spans}
    assert "aten::addmm" in names and "host->device" in names and "device->host" in names
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans) and data["otherData"]["dropped"] == 0
    threads = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e["ph"] == "M"}
    op_threads = {e["tid"] for e in spans if e["name"] == "aten::addmm"}
    assert "this thread (issuing ops)" in {threads[t] for t in op_threads}
    assert any(threads[e["tid"]].startswith("executor") for e in spans if e["cat"] == "execute")
    device = [e for e in spans if e["cat"] == "device"]
    assert device and all(threads[e["tid"]].startswith("device") and e["dur"] > 0 for e in device), device
    # Nothing is recorded once the block ended.
    model(x.to("tpu")).sum().item()
    assert json.loads(path.read_text()) == data


def test_trace_records_compilations(tmp_path):
    import json
    path = tmp_path / "trace.json"
    with debug.trace(str(path)):
        (torch.arange(37.0, device="tpu") * 3 - 1).cpu()  # a shape no other test compiles
    spans = json.loads(path.read_text())["traceEvents"]
    compiles = [e for e in spans if e.get("cat") == "compile"]
    assert compiles and all("nodes" in e["args"]["detail"] for e in compiles)


class _Slow(torch.nn.Module):
    """Head dim 64 attention, a CPU fallback and an .item() in its forward."""

    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(128, 2, batch_first=True)
        self.proj = torch.nn.Linear(128, 72)

    def forward(self, x):
        y, _ = self.attn(x, x, x)
        if y.abs().sum().item() > 0:  # ADVISE-SYNC
            y = y * 1.0
        m = torch.eye(4, device=x.device) * 2
        torch.linalg.eig(m)  # ADVISE-FALLBACK
        return self.proj(y)


def test_advise_ranks_what_costs_time():
    torch.manual_seed(0)
    model = _Slow().to("tpu")
    x = torch.randn(2, 128, 128, device="tpu")
    findings = debug.advise(model, x, report=False)
    kinds = [f["kind"] for f in findings]
    assert findings == sorted(findings, key=lambda f: -f["cost"])
    fallback = next(f for f in findings if f["kind"] == "cpu fallback")
    assert fallback["where"].startswith(f"{__file__}:{_line_of('ADVISE-FALLBACK')}")
    assert "aten::linalg_eig" in fallback["detail"]
    sync = next(f for f in findings if f["kind"] == "sync point")
    assert sync["where"].startswith(f"{__file__}:{_line_of('ADVISE-SYNC')}") and ".item()" in sync["detail"]
    narrow = [f for f in findings if f["kind"] in ("matmul", "attention") and "attn" in f["where"]]
    assert narrow and any("64" in f["detail"] for f in narrow), findings
    assert any(f["kind"] == "matmul" and "proj" in f["where"] and "72" in f["detail"] for f in findings), findings
    assert "float32 matmuls" in kinds
    assert all(p.grad is None for p in model.parameters())
    assert "torchtpu advice" in torchtpu.advisor.format_findings(findings)


def test_advise_on_a_clean_model_in_fused_mode():
    model = torch.nn.Linear(128, 256).to("tpu")
    x = torch.randn(128, 128, device="tpu")
    with torchtpu.eager_mode("fused"), torch.autocast("tpu"):
        findings = debug.advise(model, x, report=False)
    assert findings == [], findings

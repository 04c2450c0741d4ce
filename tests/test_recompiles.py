"""Why each compilation happened: causes counted in metrics, the difference from
the site's previous program named in words with the user's line, live reports
under TORCHTPU_DEBUG=recompiles and a warning for a site that keeps compiling."""
import os
import subprocess
import sys

import pytest
import torch

import torchtpu

BUCKETS_OFF = dict(TORCHTPU_BUCKETS="off")


@pytest.fixture
def no_buckets():
    """Programs compile at their exact sizes (each new size is a new shape)."""
    torchtpu._C._set_buckets([])
    yield
    torchtpu._C._set_buckets([0])

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINES = {}


def _step(lin, n, width):
    x = torch.arange(3 * n * width, dtype=torch.float32).reshape(3, n, width).to("tpu") / 100
    y = lin(x).softmax(-1).sum()  # the step's line
    LINES["step"] = _step.__code__.co_firstlineno + 2
    return y.item()


def _events_here():
    return [e for e in torchtpu.debug.recompiles() if e["site"].startswith(__file__ + ":")]


def test_causes_name_the_varying_shape(each_mode, no_buckets):
    """Every mode: the first program of the line is a new program, each new length a new shape whose
    detail names the tensor shape before and after; a length seen before compiles nothing."""
    width = {"debug": 11, "strict": 13, "fused": 15}[each_mode]  # shapes no other test compiles
    lin = torch.nn.Linear(width, width).to("tpu")
    torchtpu.debug.reset_metrics()
    before = torchtpu.debug.metrics()
    lengths = [5, 6, 7]
    for n in lengths:
        expected = torch.nn.functional.linear(
            torch.arange(3 * n * width, dtype=torch.float32).reshape(3, n, width) / 100,
            lin.weight.detach().cpu(), lin.bias.detach().cpu()).softmax(-1).sum()
        assert abs(_step(lin, n, width) - expected.item()) <= 1e-4 * max(1.0, abs(expected.item()))
    after = torchtpu.debug.metrics()
    events = _events_here()
    causes = {k: after["compilations_by_cause"][k] - before["compilations_by_cause"][k]
              for k in after["compilations_by_cause"]}
    assert sum(causes.values()) == after["compilations"] - before["compilations"] > 0
    step_lines = {f"{__file__}:{LINES['step'] - k} in _step" for k in (0, 1)}  # Fused: the program's first line
    here = [e for e in events if e["site"] in step_lines]
    assert here, events
    assert all(e["cause"] in ("new_program", "new_shape") for e in here), here
    shaped = [e["detail"] for e in here if e["cause"] == "new_shape"]
    for a, b in ((5, 6), (6, 7)):  # as the tensor, or as linear's flat view of it
        forms = (f"[3, {a}, {width}] -> [3, {b}, {width}]", f"[{3 * a}, {width}] -> [{3 * b}, {width}]")
        assert any(f in d for d in shaped for f in forms), (a, b, shaped)
    # A length seen before: nothing compiles.
    seen, reported = torchtpu.debug.metrics()["compilations"], len(_events_here())
    _step(lin, 6, width)
    assert torchtpu.debug.metrics()["compilations"] == seen
    assert len(_events_here()) == reported


def test_compiled_function_reports_new_shapes(no_buckets):
    """torch.compile(backend="tpu") with bucketing off: Dynamo's dynamic graph compiles one program per
    size, each reported as a new shape of the same program."""
    lin = torch.nn.Linear(17, 17).to("tpu")
    f = torch.compile(lambda x: lin(x).relu().sum(), backend="tpu")
    torchtpu.debug.reset_metrics()
    for n in (3, 4, 5):
        x = torch.randn(2, n, 17)
        torch.testing.assert_close(f(x.to("tpu")).cpu(), torch.nn.functional.linear(
            x, lin.weight.detach().cpu(), lin.bias.detach().cpu()).relu().sum(), rtol=1e-5, atol=1e-5)
    events = [e for e in _events_here() if "lambda" in e["site"]]
    assert [e["cause"] for e in events][-2:] == ["new_shape", "new_shape"], events
    assert "[8, 17] -> [10, 17]" in events[-1]["detail"], events[-1]


SCRIPT = """
import sys, warnings, torch, torchtpu
warnings.simplefilter("always")
torchtpu.set_eager_mode(sys.argv[1])
for n in range(2, 8):
    x = torch.ones(n, 19).to("tpu")  # an upload: nothing compiles here
    total = (x * 2).sum()  # varying line
    total.item()
print("done", flush=True)
"""


def test_debug_recompiles_prints_and_warns_once(tmp_path):
    """TORCHTPU_DEBUG=recompiles prints each recompilation with the user's line; past
    TORCHTPU_RECOMPILE_LIMIT a warning points at that line, once."""
    script = tmp_path / "vary.py"
    script.write_text(SCRIPT)
    line = SCRIPT.splitlines().index("    total = (x * 2).sum()  # varying line") + 1
    for mode in ("strict", "fused"):
        env = dict(os.environ, TORCHTPU_DEBUG="recompiles", TORCHTPU_RECOMPILE_LIMIT="3", **BUCKETS_OFF,
                   TORCHTPU_CACHE_DIR=str(tmp_path / f"cache-{mode}"),
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
        reports = [ln for ln in r.stderr.splitlines() if ln.startswith("torchtpu: recompiled at")]
        assert reports, r.stderr
        assert all(f"{script}:{line} in <module>" in ln and "new_shape" in ln for ln in reports), reports
        assert any("[3, 19] -> [4, 19]" in ln for ln in reports), reports
        warned = [ln for ln in r.stderr.splitlines() if "compiled again" in ln]
        sites = {ln.split(": UserWarning")[0] for ln in warned}
        assert sites == {f"{script}:{line}"}, r.stderr
        ops = {ln.split("(first op ")[1].split(")")[0] for ln in warned}
        assert len(warned) == len(ops), warned  # once per program of that line


def test_bad_debug_setting_is_refused():
    r = subprocess.run([sys.executable, "-c", "import torchtpu"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TORCHTPU_DEBUG="recompile",
                                PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert r.returncode != 0 and "TORCHTPU_DEBUG='recompile' is not valid" in r.stderr, r.stderr


def test_bucketed_programs_are_reported_as_new_buckets():
    """With bucketing (the default), a Fused program seen again at another size compiles its bucket's
    program once, reported as a new bucket; sizes of that bucket compile nothing more."""
    lin = torch.nn.Linear(21, 21).to("tpu")
    with torchtpu.eager_mode("fused"):
        torchtpu.debug.reset_metrics()
        for n in (5, 6, 7, 9):
            x = torch.randn(2, n, 21)
            torch.testing.assert_close(lin(x.to("tpu")).softmax(1).sum(1).cpu(), torch.nn.functional.linear(
                x, lin.weight.detach().cpu(), lin.bias.detach().cpu()).softmax(1).sum(1), rtol=1e-5, atol=1e-5)
    causes = torchtpu.debug.metrics()["compilations_by_cause"]
    events = [e for e in _events_here() if e["cause"] == "new_bucket"]
    assert causes["new_bucket"] == 1 and causes["new_shape"] == 0, causes
    assert len(events) == 1 and "sizes up to 16" in events[0]["detail"], events



@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_new_dtype_or_a_number_that_became_a_tensor_is_named(mode):
    """The same line compiled again for another dtype, and for a tensor where a Python number
    was: each event names the input that changed, checked against the values the CPU gives."""
    x = torch.arange(37, dtype=torch.float32) / 7  # a size no other test compiles
    with torchtpu.eager_mode(mode):
        torchtpu.debug.recompiles()  # drained
        got = []
        for arg, scale in ((x, 1.5), (x.to(torch.bfloat16), 1.5), (x, torch.tensor(1.5))):
            scale = scale.to("tpu") if isinstance(scale, torch.Tensor) else scale
            got.append(torch.atan2(arg.to("tpu") * scale, arg.to("tpu") + 2).cpu())  # the changing line
        details = " | ".join(e["detail"] for e in _events_here())
    for (arg, scale), g in zip(((x, 1.5), (x.to(torch.bfloat16), 1.5), (x, torch.tensor(1.5))), got):
        torch.testing.assert_close(g, torch.atan2(arg * scale, arg + 2))
    assert "dtype f32 -> bf16" in details, details
    assert "a Python number became a tensor" in details, details

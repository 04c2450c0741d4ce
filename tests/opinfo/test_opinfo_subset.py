"""A CI-sized slice of the OpInfo sweep (tests/opinfo/sweep.py): important ops,
every variant in float32, functional and grad in bfloat16, functional in int64,
run under the sweep's crash guard. A test fails on any wrong result, crash or
hang of its op; an error where the CPU succeeds and a CPU fallback are
reported by `make opinfo`, not failed here.

Entries known to be wrong today are strict xfails naming their defect: they
fail the run once fixed, so the mark goes with the fix.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

OPS = ("abs", "add", "addmm", "amax", "argmax", "bmm", "cat", "clamp", "clone", "cumsum", "div.no_rounding_mode",
       "exp", "gather", "index_select", "log", "masked_fill", "matmul", "maximum", "mean", "mul", "neg",
       "nn.functional.conv2d", "nn.functional.cross_entropy", "nn.functional.embedding", "nn.functional.gelu",
       "nn.functional.layer_norm", "nn.functional.linear", "nn.functional.relu", "pow", "reshape", "rsqrt",
       "sigmoid", "softmax", "sqrt", "sub", "sum", "tanh", "transpose", "where")
RUNS = (("float32", "functional,out,inplace,grad,nonfinite"), ("bfloat16", "functional,grad"),
        ("int64", "functional"))

# (op, variant, dtype) -> the defect; an entry here must come out crash, hang or fail.
KNOWN = {}

BAD = ("fail", "crash", "hang")


@pytest.fixture(scope="module")
def results():
    json_path = os.path.join(tempfile.mkdtemp(prefix="torchtpu-opinfo-subset-"), "report.json")
    for dtype, variants in RUNS:
        cmd = [sys.executable, os.path.join(HERE, "sweep.py"), "--ops", ",".join(OPS), "--dtypes", dtype,
               "--variants", variants, "--json", json_path, "--md", json_path[:-4] + "md", "--timeout", "60"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(json_path) as f:
        data = json.load(f)
    (entries,) = data["entries"].values()
    return entries


@pytest.mark.parametrize("op", OPS)
def test_op_matches_cpu(op, results):
    mine = {k: r for k, r in results.items() if r["op"] == op}
    assert mine, f"{op}: no entry ran"
    bad = []
    for key, r in sorted(mine.items()):
        known = KNOWN.get((op, r["variant"], r["dtype"]))
        if known:
            continue
        if r["status"] in BAD:
            first = r.get("first") or {}
            bad.append(f"{r['variant']} {r['dtype']}: {r['status']} at sample {first.get('index')} "
                       f"({first.get('sample')}): {first.get('detail')}")
    assert not bad, f"{op}:\n" + "\n".join(bad)


@pytest.mark.parametrize("entry", sorted(KNOWN))
def test_known_defect_still_present(entry, results):
    """Each KNOWN entry still fails; when it passes, drop it from KNOWN."""
    r = results.get("|".join(entry))
    assert r is not None, f"{entry}: did not run"
    assert r["status"] in BAD, f"{entry} is now {r['status']}: remove it from KNOWN ({KNOWN[entry]})"

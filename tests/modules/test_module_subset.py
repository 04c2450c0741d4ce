"""A CI-sized slice of PyTorch's module suite on tpu (tests/modules/parity.py,
`make modules` runs all of module_db): float32, training and eval where they
differ, each module's outputs and gradients against the CPU with PyTorch's
test_cpu_gpu_parity tolerances, and no CPU fallback."""
import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ("nn.Linear", "nn.Conv2d", "nn.ConvTranspose2d", "nn.LayerNorm", "nn.GroupNorm", "nn.BatchNorm2d",
           "nn.Embedding", "nn.GELU", "nn.CrossEntropyLoss", "nn.CTCLoss", "nn.LSTM", "nn.GRUCell",
           "nn.MultiheadAttention", "nn.TransformerEncoderLayer", "nn.TransformerEncoder", "nn.MaxPool2d",
           "nn.AdaptiveAvgPool2d", "nn.ReflectionPad2d")


@pytest.fixture(scope="module")
def results():
    out = os.path.join(tempfile.mkdtemp(prefix="torchtpu-modules-"), "modules.json")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "parity.py"), "--modules", ",".join(MODULES),
                           "--dtypes", "float32", "--json", out], capture_output=True, text=True, timeout=1200)
    assert os.path.exists(out), proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


@pytest.mark.parametrize("name", MODULES)
def test_module_matches_cpu(name, results):
    mine = {k: r for k, r in results.items() if k.split("|")[0] == name}
    assert mine, f"{name}: no entry ran"
    bad = [f"{k}: {r['status']}: {r['detail']}" for k, r in sorted(mine.items()) if r["status"] not in ("pass", "skip")]
    assert not bad, "\n".join(bad)

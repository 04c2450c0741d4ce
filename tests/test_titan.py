"""TorchTitan (torchtitan==0.3.0, installed by `make test` beside the venv)
trains its stock llama3 debug model on tpu (complex RoPE, FlexAttention,
fused AdamW) through its own entry point, against the CPU from the same seed
checkpoint: torch.compile with selective activation checkpointing on one
process, FSDP2 on two and tensor parallel on two (tests/titan/run_titan.py;
`python tests/titan/run_titan.py --configs all` runs every configuration)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "titan"))
import run_titan  # noqa: E402


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("titan"))
    run_titan.prepare(d, run_titan.DEFAULT_SITE)
    return d


@pytest.mark.parametrize("config", ["1proc_compile_sac", "fsdp2", "tp2"])
def test_titan_trains_like_the_cpu(config, workdir):
    site = run_titan.DEFAULT_SITE
    tpu = run_titan.run("tpu", config, workdir, site, steps=4, timeout=600)
    cpu = run_titan.run("cpu", config, workdir, site, steps=4, timeout=600)
    summary = run_titan.compare(config, tpu, cpu)
    assert summary["ok"], summary["problems"]
    assert summary["max_rel_loss_diff"] < 1e-5

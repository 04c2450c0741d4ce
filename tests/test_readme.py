"""The README's quick start runs as written, in a fresh process."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quick_start_runs_verbatim(tmp_path):
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    section = readme[readme.index("## Quick start"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"loss \d+\.\d{4}", lines[0]) and lines[1] == "torch.Size([64, 1])", r.stdout
    assert r.stderr == "", r.stderr

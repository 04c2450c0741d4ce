"""The package as pip builds it: `pip wheel .` from the tree the suite
compiled (the same CMake build directory, so nothing recompiles), installed
into a fresh venv that sees the project venv's torch, then used there from
another directory: torch.compile(backend="tpu") and tpu tensors right after
`import torch` (entry points), `python -m torchtpu.env`; the wheel's
contents; the refusal of another torch; autoload's warning when torchtpu
cannot start; the Dynamo registration that `import torchtpu` makes."""
import os
import re
import site
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args, cwd, env=None, timeout=600):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", str(out),
          "-Cbuild-dir=build", "-Ccmake.define.TORCHTPU_CPP_TESTS=ON", "."], cwd=ROOT)
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".whl")]
    return path


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory):
    """A venv with the wheel installed and, on its path after its own
    site-packages, the project venv's (torch, the plugin)."""
    root = tmp_path_factory.mktemp("venv")
    venv = os.path.join(root, "venv")
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=root)
    py = os.path.join(venv, "bin", "python")
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "project-venv.pth"), "w") as f:
        f.write(sysconfig.get_path("purelib") + "\n")
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel], cwd=root)
    return py, str(root)


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TORCHTPU_TORCH_XLA")}
    env.update(extra)
    return env


def test_wheel_contents(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert "torchtpu/_C.so" in names and "torchtpu/_build_info.py" in names and "torchtpu/compat/__init__.py" in names
        assert not any(n.startswith(("tests/", "csrc/", "build/")) or n.endswith(".in") for n in names)
        dist = [n for n in names if ".dist-info/" in n]
        eps = z.read(next(n for n in dist if n.endswith("entry_points.txt"))).decode()
        assert "[torch_dynamo_backends]\ntpu = torchtpu.dynamo:backend" in eps
        assert "[torch.backends]\ntpu = torchtpu._autoload:load" in eps
        metadata = z.read(next(n for n in dist if n.endswith("/METADATA"))).decode()
        assert "License-Expression: Apache-2.0" in metadata and "Requires-Dist: torch==2.13.0" in metadata
        assert any(n.endswith("licenses/LICENSE") for n in dist)
        info = z.read("torchtpu/_build_info.py").decode()
        assert 'version = "0.1.0"' in info and 'torch_version = "2.13.0' in info
        binary = z.read("torchtpu/_C.so")
    # No path of the machine that built it (the checkout, the venv) in the binary.
    for path in {ROOT, os.path.dirname(os.path.dirname(sysconfig.get_path("purelib")))}:
        assert path.encode() not in binary, path


def test_installed_wheel_works_from_import_torch(fresh_venv):
    py, cwd = fresh_venv
    code = ("import torch\n"
            "f = torch.compile(lambda x: torch.sin(x) * 2 + 1, backend='tpu')\n"
            "x = torch.linspace(-1, 1, 8, device='tpu')\n"
            "assert torch.allclose(f(x).cpu(), torch.sin(x.cpu()) * 2 + 1, atol=1e-6)\n"
            "import torchtpu\n"
            "print(torchtpu.__file__)\n")
    r = _run([py, "-c", code], cwd=cwd, env=_clean_env())
    assert r.stdout.strip().startswith(os.path.join(cwd, "venv")), r.stdout
    r = _run([py, "-m", "torchtpu.env"], cwd=cwd, env=_clean_env())
    assert "torchtpu 0.1.0 (built against torch 2.13.0" in r.stdout and "import torchtpu: ok" in r.stdout


def test_another_torch_is_refused(fresh_venv):
    py, cwd = fresh_venv
    code = "import torch; torch.__version__ = '2.99.0'; import torchtpu"
    r = subprocess.run([py, "-c", code], cwd=cwd, env=_clean_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert re.search(r"ImportError: torchtpu 0\.1\.0 was built against torch 2\.13\.0(\+cpu)?, but torch 2\.99\.0 "
                     r"is installed: .* Install torch==2\.13\.0, or rebuild torchtpu", r.stderr), r.stderr


def test_autoload_warns_when_torchtpu_cannot_start(fresh_venv):
    py, cwd = fresh_venv
    code = ("import warnings; warnings.simplefilter('always')\n"
            "import torch\n"
            "print(torch.ones(2).sum().item())\n"
            "try:\n    import torchtpu\nexcept ValueError as e:\n    print('raised', e)\n")
    r = _run([py, "-c", code], cwd=cwd, env=_clean_env(TORCHTPU_EAGER_MODE="bogus"))
    assert "torchtpu is installed but could not start" in r.stderr and "TORCHTPU_EAGER_MODE='bogus'" in r.stderr
    assert r.stdout.splitlines()[0] == "2.0" and "TORCHTPU_EAGER_MODE='bogus' is not valid" in r.stdout.splitlines()[1]


def test_import_registers_the_dynamo_backend():
    """Without package metadata (PYTHONPATH, a copied folder) `import torchtpu`
    registers backend "tpu" itself, when Dynamo loads."""
    code = ("import sys, torch, torchtpu\n"
            "assert 'torch._dynamo' not in sys.modules\n"
            "from torch._dynamo.backends import registry\n"
            "assert registry._COMPILER_FNS['tpu'] is torchtpu._autoload.tpu\n"
            "registry._discover_entrypoint_backends = lambda: None\n"
            "f = torch.compile(lambda x: x * 3, backend='tpu')\n"
            "print(f(torch.arange(3.0, device='tpu')).cpu().tolist())\n")
    r = _run([sys.executable, "-c", code], cwd=ROOT, env=_clean_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    assert r.stdout.strip() == "[0.0, 3.0, 6.0]"


def test_editable_install_runs_the_checkout():
    import torchtpu
    assert os.path.dirname(os.path.abspath(torchtpu.__file__)) == os.path.join(ROOT, "torchtpu")
    assert not any(os.path.exists(os.path.join(d, "torchtpu-dev.pth")) for d in site.getsitepackages())

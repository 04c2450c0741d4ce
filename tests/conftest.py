"""Shared fixtures. `each_mode` runs a test once per eager mode: every op and
model test checks Debug, Strict and Fused Eager against the same reference."""
import atexit
import os
import shutil
import tempfile

import pytest

# A fresh compilation cache directory per test session, so that compile
# counts do not depend on earlier runs.
os.environ["TORCHTPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-cache-")
atexit.register(shutil.rmtree, os.environ["TORCHTPU_CACHE_DIR"], True)

import torchtpu  # noqa: E402

MODES = ("debug", "strict", "fused")


@pytest.fixture(params=MODES)
def each_mode(request):
    previous = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(request.param)
    try:
        yield request.param
        torchtpu.synchronize()
    finally:
        torchtpu.set_eager_mode(previous)

#!/usr/bin/env bash
# Builds torchtpu against this machine's python3 and PyTorch and runs
# benchmarks/gpu_check.py and a slice of the test suite on XLA's GPU PJRT
# plugin. PJRT_INCLUDE_DIR names the folder holding pjrt_c_api.h (the
# xla-cpu-pjrt wheel's header); TORCHTPU_PJRT_PLUGIN the plugin, else JAX's
# CUDA plugin is looked up. LOG is where the output goes too.
set -u -o pipefail
PY=${PY:-python3}
LOG=${LOG:-/tmp/gpu_check.log}
BUILD=${BUILD:-/tmp/torchtpu-gpu-build}
exec > >(tee "$LOG") 2>&1
nvidia-smi -L
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__)"
SITE=$($PY -c "import site; print(site.getsitepackages()[0])")
if [ -z "${TORCHTPU_PJRT_PLUGIN:-}" ]; then
  for p in "$SITE"/jax_plugins/xla_cuda13/xla_cuda_plugin.so "$SITE"/jax_plugins/xla_cuda12/xla_cuda_plugin.so; do
    [ -f "$p" ] && export TORCHTPU_PJRT_PLUGIN=$p && break
  done
fi
echo "plugin: ${TORCHTPU_PJRT_PLUGIN:-none}"
# The plugin's CUDA libraries come from the nvidia-* wheels beside it.
export LD_LIBRARY_PATH=$(ls -d "$SITE"/nvidia/*/lib "$SITE"/nvidia/cu*/lib 2>/dev/null | tr '\n' ':')${LD_LIBRARY_PATH:-}
t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v $PY)" \
  -DTORCHTPU_CPP_TESTS=OFF ${PJRT_INCLUDE_DIR:+-DPJRT_INCLUDE_DIR=$PJRT_INCLUDE_DIR} >/dev/null || exit 2
cmake --build "$BUILD" -j"$(nproc)" > "$BUILD.log" 2>&1
rc=$?
grep -E "error|FAILED" "$BUILD.log" | head -60
echo "build rc=$rc in $(( $(date +%s) - t0 )) s"
[ $rc = 0 ] || exit 3
export TORCHTPU_CACHE_DIR=/tmp/torchtpu-gpu-cache PYTHONUNBUFFERED=1
timeout 240 $PY benchmarks/gpu_check.py
echo "gpu_check rc=$?"
timeout ${TEST_SECONDS:-120} $PY -m pytest -q -p no:cacheprovider --timeout 60 \
  tests/test_ops.py tests/test_semantics.py tests/test_models.py 2>&1 | tail -40
echo "tests rc=$?"

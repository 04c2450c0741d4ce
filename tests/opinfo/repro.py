"""Reruns one sample of the OpInfo sweep and prints what the device and the CPU give.

    TORCHTPU_EAGER_MODE=strict python tests/opinfo/repro.py OP VARIANT DTYPE [SAMPLE_INDEX]
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(os.path.dirname(HERE))]
os.environ.setdefault("TORCHTPU_CACHE_DIR", os.path.join(tempfile.gettempdir(), "torchtpu-opinfo-cache"))

import torch  # noqa: E402
import torchtpu  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

import harness  # noqa: E402


def show(label, fn):
    try:
        out = fn()
        if isinstance(out, dict):
            out = {k: v for k, v in out.items() if k != "same"}
        out = harness._fetch(out) if label.strip() == "tpu" else harness._to_cpu_tree(out)
        torch.set_printoptions(precision=8, threshold=64)
        print(f"{label}:", pytree.tree_map(lambda x: x, out))
    except Exception as e:
        print(f"{label} raises {type(e).__name__}: {harness._short(e, 600)}")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    key, variant, dtype = argv[:3]
    op = harness.op_table()[key]
    sample_list = list(harness.samples(op, variant, harness.DTYPES[dtype]))
    indices = [int(argv[3])] if len(argv) > 3 else range(len(sample_list))
    for i in indices:
        sample = sample_list[i]
        print(f"sample {i}: {harness.describe_sample(sample)}")
        status, detail, fallbacks = harness.run_sample(op, key, variant, sample, harness.DTYPES[dtype])
        print(f"  status {status} {detail} {fallbacks or ''}")
        if status not in ("pass", "skip"):
            fn = {"op": op, "inplace": op.inplace_variant}
            if variant == "out":
                inp, args, kwargs = harness.copy_sample(sample, "cpu")
                fn["out_template"] = op(inp, *args, **kwargs)
            show("  tpu", lambda: harness._call(fn, "tpu", sample, variant))
            show("  cpu", lambda: harness._call(fn, "cpu", sample, variant))


if __name__ == "__main__":
    main(sys.argv[1:])

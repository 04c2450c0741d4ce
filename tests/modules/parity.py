"""PyTorch's module suite (module_db) on the tpu device against the CPU, as
PyTorch's TestModule.test_cpu_gpu_parity runs it for CUDA: each module built
from each of its ModuleInputs, the CPU's parameters copied to the device,
forward outputs compared, then five backward passes with random output
gradients comparing input and parameter gradients; in training and eval mode
where they differ. Tolerances are that test's (float32 atol 5e-2, float64
4e-4) unless the entry overrides them; entries PyTorch skips for the test
are skipped. Every entry is also checked for CPU fallbacks.

    python tests/modules/parity.py [--dtypes float32,float64] [--modules nn.Linear,...] [--json out.json]

Prints one line per (module, dtype, mode) and a summary; exits 1 on any
failure.
"""
import argparse
import copy
import json
import sys
import traceback
import unittest

import torch

import torchtpu
from torchtpu import debug

DTYPES = {"float32": torch.float32, "float64": torch.float64}
TOL = {torch.float32: (5e-2, 0.0), torch.float64: (4e-4, 0.0)}


def decorations(info, dtype):
    """(skip reason or None, (atol, rtol)) PyTorch's decorators give this
    entry in test_cpu_gpu_parity."""
    atol, rtol = TOL[dtype]
    for d in info.decorators:
        if getattr(d, "test_name", None) not in (None, "test_cpu_gpu_parity"):
            continue
        if getattr(d, "cls_name", None) not in (None, "TestModule"):
            continue
        if getattr(d, "device_type", None) not in (None, "cuda"):
            continue
        if d.dtypes is not None and dtype not in d.dtypes:
            continue
        if not d.active_if:
            continue
        for dec in d.decorators:
            name = getattr(dec, "__qualname__", type(dec).__name__)
            if name.startswith("skip.") or name in ("expectedFailure",):
                return f"PyTorch marks it {name.split('.')[0]} for this test", (atol, rtol)
            overrides = getattr(dec, "d", None)
            if isinstance(overrides, dict) and dtype in overrides:
                atol, rtol = overrides[dtype].atol, overrides[dtype].rtol
    return None, (atol, rtol)


def to_device(obj):
    if isinstance(obj, torch.Tensor):
        r = obj.detach().to("tpu")
        r.requires_grad = obj.requires_grad
        return r
    if isinstance(obj, tuple):
        return tuple(to_device(o) for o in obj)
    if isinstance(obj, list):
        return [to_device(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v) for k, v in obj.items()}
    return copy.deepcopy(obj)


def retain(obj):
    for t in torch.utils._pytree.tree_leaves(obj):
        if isinstance(t, torch.Tensor) and t.requires_grad and not t.is_leaf:
            t.retain_grad()


def grads(obj):
    return [t.grad for t in torch.utils._pytree.tree_leaves(obj) if isinstance(t, torch.Tensor)]


def same(got, expected, atol, rtol, what):
    g = torch.utils._pytree.tree_leaves(got)
    e = torch.utils._pytree.tree_leaves(expected)
    assert len(g) == len(e), f"{what}: {len(g)} values, the CPU's {len(e)}"
    for i, (a, b) in enumerate(zip(g, e)):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{what} {i}: not a tensor"
            torch.testing.assert_close(a.detach().cpu(), b.detach(), atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m: f"{what} {i}: {m}")
        elif b is None:
            assert a is None, f"{what} {i}: a gradient where the CPU has none"
        else:
            assert a == b, f"{what} {i}: {a!r}, the CPU's {b!r}"


def run_input(info, mi, dtype, training, tol):
    atol, rtol = tol
    cls = info.module_cls
    cpu_args, cpu_kwargs = mi.forward_input.args, mi.forward_input.kwargs
    dev_args, dev_kwargs = to_device((cpu_args, cpu_kwargs))
    retain((cpu_args, cpu_kwargs, dev_args, dev_kwargs))
    args, kwargs = mi.constructor_input.args, mi.constructor_input.kwargs
    torch.manual_seed(0)
    cpu_module = cls(*args, **kwargs).to(dtype).to("cpu").train(training)
    dev_module = cls(*args, **kwargs).to(dtype).to("tpu").train(training)
    if issubclass(cls, torch.nn.modules.lazy.LazyModuleMixin):
        with torch.no_grad():
            cpu_module(*cpu_args, **cpu_kwargs)
            dev_module(*dev_args, **dev_kwargs)
    for p_cpu, p_dev in zip(cpu_module.parameters(), dev_module.parameters()):
        p_dev.data.copy_(p_cpu)
    cpu_out = cpu_module(*cpu_args, **cpu_kwargs)
    dev_out = dev_module(*dev_args, **dev_kwargs)
    same(dev_out, cpu_out, atol, rtol, "output")

    def backward(c, d):
        g = c.clone().normal_()
        c.backward(g, retain_graph=True)
        d.backward(g.to(d.device, d.dtype), retain_graph=True)
        same(grads(dev_args), grads(cpu_args), atol, rtol, "input gradient")
        same([p.grad for p in dev_module.parameters()], [p.grad for p in cpu_module.parameters()], atol, rtol,
             "parameter gradient")
        same(grads(dev_kwargs), grads(cpu_kwargs), atol, rtol, "keyword input gradient")

    for _ in range(5):
        pairs = zip(torch.utils._pytree.tree_leaves(cpu_out), torch.utils._pytree.tree_leaves(dev_out))
        for c, d in pairs:
            if isinstance(c, torch.Tensor) and c.requires_grad:
                backward(c, d)


def run_entry(info, dtype, training):
    """(status, detail, fallbacks): pass, fail, raises or skip."""
    reason, tol = decorations(info, dtype)
    if reason:
        return "skip", reason, {}
    debug.reset_metrics()
    torch.manual_seed(0)
    try:
        inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True, training=training)
    except Exception as e:  # noqa: BLE001 - the suite's own inputs
        return "skip", f"module_inputs_func raises: {e}", {}
    n = 0
    for mi in inputs:
        if mi.forward_input is None:
            continue
        n += 1
        try:
            run_input(info, mi, dtype, training, tol)
        except AssertionError as e:
            return "fail", f"input {mi.desc or n}: {str(e)[:400]}", {}
        except Exception as e:  # noqa: BLE001 - reported, not raised
            return "raises", f"input {mi.desc or n}: {type(e).__name__}: {str(e)[:400]}", {}
    torchtpu.synchronize()
    fallbacks = debug.metrics()["cpu_fallbacks"]
    if fallbacks:
        return "falls_back", f"{n} inputs; fallback ops {sorted(fallbacks)}", fallbacks
    return "pass", f"{n} inputs", {}


def main(argv=None):
    from torch.testing._internal.common_modules import module_db
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--modules", default="", help="comma-separated module_db names (default: all)")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    wanted = set(filter(None, args.modules.split(",")))
    results = {}
    for info in module_db:
        if wanted and info.name not in wanted:
            continue
        for dname in args.dtypes.split(","):
            dtype = DTYPES[dname]
            if dtype not in info.dtypes:
                continue
            for training in ((True, False) if info.train_and_eval_differ else (True,)):
                key = f"{info.name}|{dname}|{'train' if training else 'eval'}"
                try:
                    status, detail, fb = run_entry(info, dtype, training)
                except Exception:  # noqa: BLE001
                    status, detail, fb = "raises", traceback.format_exc(limit=3)[-400:], {}
                results[key] = {"status": status, "detail": detail, "fallbacks": fb}
                print(f"{status:10s} {key}: {detail}", flush=True)
    counts = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("summary:", json.dumps(counts, sort_keys=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 1 if any(r["status"] in ("fail", "raises") for r in results.values()) else 0


if __name__ == "__main__":
    unittest.util._MAX_LENGTH = 200
    sys.exit(main())

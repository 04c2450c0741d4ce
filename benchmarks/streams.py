"""Copy/compute overlap: a host-to-device copy of a pinned batch issued on a
side stream (non_blocking=True, the copy queue) while the compute queue runs
a chain of matmuls, against the same copy and compute one after the other,
all in this run. Prints the median milliseconds of each variant, the time
the non-blocking copy takes to return to Python, the ratio serial /
overlapped, and the compute time measured by torch.tpu.Event.

    python benchmarks/streams.py [--mib 64] [--size 768] [--matmuls 8] [--repeats 7]
"""
import argparse
import json
import statistics
import time

import torch

import torchtpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--size", type=int, default=768)
    p.add_argument("--matmuls", type=int, default=8)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    dev = torchtpu.get_device()
    host = torch.rand(a.mib * 2**20 // 4).pin_memory()
    w = torch.randn(a.size, a.size, device=dev) / a.size ** 0.5
    x0 = torch.randn(a.size, a.size, device=dev)
    side = torch.tpu.Stream()

    def compute():
        x = x0
        for _ in range(a.matmuls):
            x = torch.tanh(x @ w)
        return x

    def copy(non_blocking):
        with torch.tpu.stream(side):
            return host.to(dev, non_blocking=non_blocking)

    def timed(fn):
        torchtpu.synchronize()
        start = time.perf_counter()
        fn()
        torchtpu.synchronize()
        return (time.perf_counter() - start) * 1000

    results = {"compute": [], "copy": [], "serial": [], "overlapped": [], "copy_issue": [], "event_compute": []}
    compute(); copy(True); torchtpu.synchronize()  # compile, warm up
    for _ in range(a.repeats):
        results["compute"].append(timed(compute))
        results["copy"].append(timed(lambda: copy(False)))
        results["serial"].append(timed(lambda: (compute(), torchtpu.synchronize(), copy(False))))

        def overlapped():
            compute()
            s = time.perf_counter()
            copy(True)
            results["copy_issue"].append((time.perf_counter() - s) * 1000)
        results["overlapped"].append(timed(overlapped))
        start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
        torchtpu.synchronize()
        start.record()
        compute()
        end.record()
        results["event_compute"].append(start.elapsed_time(end))
    med = {k: round(statistics.median(v), 2) for k, v in results.items()}
    for k, v in med.items():
        print(json.dumps({"variant": k, "ms": v, "copy_mib": a.mib, "matmuls": a.matmuls, "size": a.size}))
    print(json.dumps({"serial_over_overlapped": round(med["serial"] / med["overlapped"], 3),
                      "ideal": round(med["serial"] / max(med["compute"], med["copy"]), 3)}))


if __name__ == "__main__":
    main()

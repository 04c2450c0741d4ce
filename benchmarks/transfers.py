"""Host-device transfers against a host memcpy of the same bytes, in one run:
for 1 MB to 64 MB of float32, the median time of
- h2d:        cpu_tensor.to("tpu") (synchronized)
- d2h:        tpu_tensor.cpu() (a new CPU tensor)
- d2h_into:   cpu_tensor.copy_(tpu_tensor) (into an existing CPU tensor)
- memcpy:     cpu_tensor.copy_(other_cpu_tensor)
Prints one JSON line per size, with each time as a multiple of the memcpy.

    python benchmarks/transfers.py
"""
import json
import statistics
import time

import torch

import torchtpu


def median_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    for mb in (1, 4, 16, 64):
        n = mb * (1 << 20) // 4
        host, other = torch.rand(n), torch.rand(n)
        dev = host.to("tpu")
        torchtpu.synchronize()
        reps = 20 if mb <= 4 else 7
        row = {
            "h2d": median_ms(lambda: (host.to("tpu"), torchtpu.synchronize()), reps),
            "d2h": median_ms(lambda: dev.cpu(), reps),
            "d2h_into": median_ms(lambda: host.copy_(dev), reps),
            "memcpy": median_ms(lambda: host.copy_(other), reps),
        }
        out = {"bench": "transfers", "megabytes": mb}
        out.update({f"{k}_ms": round(v, 2) for k, v in row.items()})
        out.update({f"{k}_over_memcpy": round(v / row["memcpy"], 2) for k, v in row.items() if k != "memcpy"})
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

"""The cost of a bucketed step once compiled: the small decoder of
variable_shapes.py (GPT-2, width 64, 2 layers, batch 4, AdamW) alternating
between two lengths of one bucket (100 and 104, bucket 128), against the same
lengths with bucketing off and against a fixed length of 128 (the bucket's own
size). Fused Eager, Strict Eager and torch.compile(backend="tpu"), each in its
own process.
Prints one JSON line per mode: the median step time of each run and the
ratios.

  python benchmarks/bucket_step.py [--modes fused,compiled,strict] [--lengths 100,104] [--steps 40]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def child(mode, lengths, steps):
    import torch
    torch.set_num_threads(1)
    import torchtpu
    torchtpu.set_eager_mode("strict" if mode == "strict" else "fused")
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging
    logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=256, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(ids):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    run = torch.compile(step, backend="tpu") if mode == "compiled" else step
    for _ in range(6):  # every program compiled
        for n in lengths:
            run(torch.randint(0, 256, (4, n)).to("tpu")).item()
    times = []
    for _ in range(steps):
        for n in lengths:
            ids = torch.randint(0, 256, (4, n)).to("tpu")
            t = time.perf_counter()
            run(ids).item()
            times.append(time.perf_counter() - t)
    times.sort()
    print("RESULT " + json.dumps({"ms": 1000 * times[len(times) // 2],
                                  "bucketed": torchtpu.debug.metrics()["buckets"]["programs"]}), flush=True)


def measure(mode, lengths, buckets, steps):
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCHTPU_BUCKETS=buckets)
    r = subprocess.run([sys.executable, HERE, "--child", mode, "--lengths", ",".join(map(str, lengths)),
                        "--steps", str(steps)], capture_output=True, text=True, env=env)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(line[0][7:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="fused,compiled")
    ap.add_argument("--lengths", default="100,104")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--child")
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",")]
    if a.child:
        child(a.child, lengths, a.steps)
        return
    for mode in a.modes.split(","):
        bucketed = measure(mode, lengths, "pow2", a.steps)
        exact = measure(mode, lengths, "off", a.steps)
        top = 16
        while top < max(lengths):
            top *= 2
        fixed = measure(mode, [top], "off", a.steps)
        print(json.dumps({"bench": "bucket_step", "mode": mode, "metric": "step_ms", "unit": "ms",
                          "lengths": lengths, "value": round(bucketed["ms"], 2),
                          "bucketed_programs": bucketed["bucketed"],
                          "exact_ms": round(exact["ms"], 2), f"fixed_{top}_ms": round(fixed["ms"], 2),
                          "vs_exact": round(bucketed["ms"] / exact["ms"], 2),
                          "vs_fixed_bucket": round(bucketed["ms"] / fixed["ms"], 2)}), flush=True)


if __name__ == "__main__":
    main()

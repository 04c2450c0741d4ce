"""generate() over prompts of many lengths: a tiny Llama (width 32, 2
layers) in Fused Eager (or Strict, --eager-mode strict) greedily generates 8 tokens for prompts of lengths
1..max in steps, then lengths between them (in buckets seen before; with
--step 1, three lengths seen before again), with Hugging Face's
default dynamic cache and with its static cache, each in its own process with
a cold compilation cache. Prints one JSON line per cache: whether every
generated sequence equals the CPU's, the large compilations (new program,
shape or bucket) per prompt, and the wall time.

  python benchmarks/generate_shapes.py [--max-len 38] [--step 3] [--caches dynamic,static]
                                       [--eager-mode fused|strict] [--buckets pow2|off]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)


def child(cache, lengths, mode):
    import torch
    torch.set_num_threads(1)
    import torchtpu
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging
    logging.set_verbosity_error()
    torchtpu.set_eager_mode(mode)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    cpu = LlamaForCausalLM(cfg).eval()
    dev = LlamaForCausalLM(cfg).eval()
    dev.load_state_dict(cpu.state_dict())
    dev.to("tpu")
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    if cache == "static":
        kw["cache_implementation"] = "static"

    def big():
        c = torchtpu.debug.metrics()["compilations_by_cause"]
        return c["new_program"] + c["new_shape"] + c["new_attributes"] + c["new_bucket"]

    per_prompt, equal, start = [], True, time.perf_counter()
    for n in lengths:
        ids = torch.randint(1, 128, (1, n))
        before = big()
        with torch.no_grad():
            want = cpu.generate(ids, **kw)
            got = dev.generate(ids.to("tpu"), **kw).cpu()
        equal &= bool(torch.equal(got, want))
        per_prompt.append(big() - before)
    print("RESULT " + json.dumps({"equal": equal, "per_prompt": per_prompt, "total_s": time.perf_counter() - start,
                                  "by_cause": torchtpu.debug.metrics()["compilations_by_cause"]}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-len", type=int, default=38)
    ap.add_argument("--step", type=int, default=3)
    ap.add_argument("--caches", default="dynamic,static")
    ap.add_argument("--eager-mode", default="fused", choices=["fused", "strict"])
    ap.add_argument("--buckets", default="pow2")
    ap.add_argument("--child")
    ap.add_argument("--lengths")
    a = ap.parse_args()
    if a.child:
        child(a.child, [int(x) for x in a.lengths.split(",")], a.eager_mode)
        return
    first = list(range(1, a.max_len + 1, a.step))
    # Lengths not run yet whose buckets were (the last length's neighbour below, not
    # above: past the largest length the cache may start a new bucket).
    again = sorted({first[len(first) // 2] + 1, first[1] + 1, first[-1] - 1} - set(first))
    again = again or [first[1], first[len(first) // 2], first[-1]]
    lengths = first + again
    for cache in a.caches.split(","):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, TORCHTPU_CACHE_DIR=d, OMP_NUM_THREADS="1", TORCHTPU_BUCKETS=a.buckets)
            r = subprocess.run([sys.executable, HERE, "--child", cache, "--lengths", ",".join(map(str, lengths)),
                                "--eager-mode", a.eager_mode], capture_output=True, text=True, env=env)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        if r.returncode != 0 or not line:
            print(json.dumps({"bench": "generate_shapes", "mode": cache, "eager_mode": a.eager_mode,
                              "error": r.stderr[-2000:]}), flush=True)
            continue
        res = json.loads(line[0][7:])
        print(json.dumps({"bench": "generate_shapes", "mode": cache, "eager_mode": a.eager_mode,
                          "buckets": a.buckets, "metric": "compilations", "unit": "programs",
                          "value": sum(res["per_prompt"]), "lengths": lengths, "per_prompt": res["per_prompt"],
                          "in_seen_buckets": res["per_prompt"][len(first):], "tokens_equal": res["equal"],
                          "total_s": round(res["total_s"], 2), "by_cause": res["by_cause"]}), flush=True)


if __name__ == "__main__":
    main()

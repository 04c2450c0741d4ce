"""Ranks running different code. Run by tests/test_distributed.py with
`python mpmd.py CASE` in each rank's process (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT set; rank 0 hosts the store). Prints "OK ..." or "RAISED: ...".

  solo      rank 0 alone logs, prints, evaluates and checkpoints between
            collectives; results match a reference.
  mismatch  rank 0 all_reduces float32[4, 4] where rank 1 all_gathers int64[3].
  extra     rank 0 issues one collective more; the others stay alive.
  killed    the last rank kills itself before a collective.
  lost      the last rank ends its process right after issuing queued
            all_reduces: the others' Gloo copies of them fail, which raises
            where a result is read and at the group's next collective.
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import torchtpu  # noqa: F401

case = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dev = torch.device("tpu", int(os.environ["LOCAL_RANK"]))
dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", 20))))
start = time.monotonic()
try:
    x = torch.full((4, 4), float(rank + 1), device=dev)
    dist.all_reduce(x)
    total = world * (world + 1) / 2
    if case == "solo":
        if rank == 0:
            print("rank 0 logs", x.sum().item(), x[0])  # syncs and prints alone
            model = torch.nn.Linear(4, 2).to(dev)
            with torch.no_grad():
                y = model(x).relu().sum()  # evaluation only on rank 0
            torch.save(model.state_dict(), os.environ["CKPT"])
            loaded = torch.load(os.environ["CKPT"], map_location="cpu")
            torch.testing.assert_close(loaded["weight"], model.weight.cpu())
            assert torch.isfinite(y).item()
        dist.barrier()
        z = x * (rank + 1)
        dist.all_reduce(z)
        torch.testing.assert_close(z.cpu(), torch.full((4, 4), total * total))
        print(f"OK rank {rank}", flush=True)
    elif case == "mismatch":
        if rank == 0:
            dist.all_reduce(x)
        else:
            outs = [torch.empty(3, dtype=torch.int64, device=dev) for _ in range(world)]
            dist.all_gather(outs, torch.arange(3, device=dev))
        print(f"NO ERROR rank {rank}", flush=True)
    elif case == "extra":
        if rank == 0:
            dist.all_reduce(x)
            print(f"NO ERROR rank {rank}", flush=True)
        else:
            time.sleep(float(os.environ.get("PG_TIMEOUT", 20)) + 5)  # alive, but never issues it
            print(f"OK rank {rank} stayed", flush=True)
    elif case == "killed":
        if rank == world - 1:
            time.sleep(1)  # the others finish the first collective and wait in the next
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(x)
        print(f"NO ERROR rank {rank}", flush=True)
    elif case == "lost":
        y = torch.tanh(x @ x) + 1
        dist.all_reduce(y)
        if rank == world - 1:
            os._exit(0)
        z = y * 2  # queued after the collective: not a sync point
        try:
            z.cpu()
            print(f"NO ERROR rank {rank} at the read", flush=True)
        except RuntimeError as e:
            print(f"READ RAISED rank {rank}: {e}", flush=True)
        dist.all_reduce(x)
        print(f"NO ERROR rank {rank}", flush=True)
except RuntimeError as e:
    print(f"RAISED rank {rank} after {time.monotonic() - start:.1f}s: {e}", flush=True)
    os._exit(3)
dist.destroy_process_group()

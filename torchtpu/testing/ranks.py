"""Ranks as threads, for tests: `run_ranks` runs a function on every rank of
a torchtpu.distributed.thread_group, each on its own thread and device."""
import datetime
import threading

import torch


def run_ranks(fn, name, n, timeout=30):
    """Runs fn(rank, group, device) for ranks 0..n-1 of the thread group
    `name`, each rank on a thread of its own with device tpu:rank; returns
    their exceptions by rank (a rank still running after 120 s fails)."""
    from torchtpu.distributed import thread_group

    errors = {}

    def body(r):
        try:
            fn(r, thread_group(r, n, name=name, timeout=datetime.timedelta(seconds=timeout)), torch.device("tpu", r))
        except Exception as e:
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return errors

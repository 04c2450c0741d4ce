"""torch.distributed on tpu: the "tpu_dist" backend across processes.

Workers in tests/distributed/ run as real ranks (torchrun, torchtpu.launch, or
plain processes sharing a TCP store) and compare against CPU references; this
file checks their output and that every run ends within a bounded time."""
import os
import re
import socket
import subprocess
import sys
import time

import pytest
import torch

import torchtpu

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "distributed")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra):
    e = dict(os.environ)
    e.pop("TORCHTPU_CPU_DEVICES", None)  # one device per local rank, as under torchrun
    e.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **{k: str(v) for k, v in extra.items()})
    return e


def torchrun(script, nproc, *args, timeout=300, nnodes=None, **extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
    if nnodes is None:
        cmd += [f"--master-port={free_port()}"]
    cmd += list(nnodes or []) + [os.path.join(WORKERS, script), *args]
    return subprocess.Popen(cmd, env=env(**extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(procs, timeout):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"distributed run did not finish within {timeout} s")
        outs.append((p.returncode, out))
    return outs


def ok_ranks(out):
    return sorted(int(r) for r in re.findall(r"OK rank (\d+)", out))  # ranks' lines may interleave


@pytest.mark.parametrize("nproc", [2, 4])
def test_collectives_against_cpu(nproc):
    (rc, out), = finish([torchrun("collectives.py", nproc)], 300)
    assert rc == 0 and ok_ranks(out) == list(range(nproc)), out[-4000:]


def test_collectives_across_two_node_groups():
    """Two torchrun agents (one per "node") meet through the c10d rendezvous on loopback."""
    port = free_port()
    nodes = ["--nnodes=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=tpu-test"]
    outs = finish([torchrun("collectives.py", 1, nnodes=nodes) for _ in range(2)], 300)
    assert all(rc == 0 for rc, _ in outs), "\n".join(o[-3000:] for _, o in outs)
    assert sorted(ok_ranks(outs[0][1]) + ok_ranks(outs[1][1])) == [0, 1]


@pytest.mark.parametrize("nproc,mode", [(2, "strict"), (4, "strict"), (2, "fused"), (2, "debug")])
def test_training_matches_single_process(nproc, mode, tmp_path):
    """DDP, FSDP2 (+ bf16 policy), DTensor, TP and DCP against one CPU process on the global batch."""
    (rc, out), = finish([torchrun("training.py", nproc, CKPT=tmp_path / "ckpt", TORCHTPU_EAGER_MODE=mode)], 600)
    assert rc == 0 and ok_ranks(out) == list(range(nproc)), out[-4000:]
    for part in ("DDP", "FSDP2", "FSDP2 bf16", "DTensor", "DTensor random", "TP", "DCP"):
        assert len(re.findall(rf"rank \d+ {part} ok", out)) == nproc, part


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_host_staged_collectives_return_before_they_run(mode):
    """all_reduce, all_gather_into_tensor and reduce_scatter_tensor (whole
    tensors, views, strided inputs, a pre-multiplied sum) read back by later
    device ops with no sync point between, and an FSDP2 step whose only sync
    point is the user's loss.item(); values as on the CPU."""
    (rc, out), = finish([torchrun("queued.py", 2, TORCHTPU_EAGER_MODE=mode)], 300)
    assert rc == 0 and ok_ranks(out) == [0, 1], out[-4000:]


def ranks(case, world, tmp_path, timeout, **extra):
    """`world` plain processes of mpmd.py: rank 0 hosts the store, as with env:// init."""
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, os.path.join(WORKERS, "mpmd.py"), case],
        env=env(RANK=r, LOCAL_RANK=r, WORLD_SIZE=world, LOCAL_WORLD_SIZE=world, MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port, CKPT=tmp_path / "rank0.pt", **extra),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(world)]
    start = time.monotonic()
    outs = finish(procs, timeout)
    return outs, time.monotonic() - start


def test_rank0_alone_logs_evaluates_and_checkpoints(tmp_path):
    outs, _ = ranks("solo", 2, tmp_path, 120)
    for r, (rc, out) in enumerate(outs):
        assert rc == 0 and f"OK rank {r}" in out, out[-3000:]
    assert "rank 0 logs" in outs[0][1] and (tmp_path / "rank0.pt").exists()


def test_mismatched_collectives_raise_on_every_rank(tmp_path):
    outs, took = ranks("mismatch", 2, tmp_path, 120)
    for r, (rc, out) in enumerate(outs):
        assert rc == 3 and f"RAISED rank {r}" in out, out[-3000:]
        # Each rank names both sides: rank, sequence number, op and shape.
        assert "collective #2" in out and "rank 0: all_reduce(sum) float32[4, 4]" in out, out[-3000:]
        assert "rank 1: all_gather int64[3]" in out, out[-3000:]
    assert took < 60


def test_a_collective_one_rank_never_issues_times_out(tmp_path):
    outs, took = ranks("extra", 2, tmp_path, 120, PG_TIMEOUT=5)
    rc, out = outs[0]
    assert rc == 3 and "rank(s) 1 did not reach collective #2" in out and "all_reduce(sum) float32[4, 4]" in out, \
        out[-3000:]
    assert outs[1][0] == 0 and "OK rank 1 stayed" in outs[1][1]


@pytest.mark.parametrize("world", [2, 3])
def test_a_killed_rank_fails_the_others_within_60s(world, tmp_path):
    outs, took = ranks("killed", world, tmp_path, 120, PG_TIMEOUT=300)
    assert outs[-1][0] == -9
    for r, (rc, out) in enumerate(outs[:-1]):
        assert rc == 3 and f"RAISED rank {r}" in out, out[-3000:]
        # Waiting for the dead rank's signature (its heartbeat stopped); had it
        # died inside the collective, Gloo's connection to it closed; a rank
        # whose store host (rank 0) raised first finds the store gone.
        assert any(m in out for m in (f"rank {world - 1} stopped responding", "tpu_dist: all_reduce failed on rank",
                                      "tpu_dist: the process group's store is unreachable")), out[-3000:]
        assert float(re.search(r"after ([\d.]+)s", out).group(1)) < 60
    assert took < 90


def test_a_lost_rank_fails_a_queued_collective_where_it_is_read_and_after(tmp_path):
    outs, took = ranks("lost", 2, tmp_path, 120, PG_TIMEOUT=30, TORCHTPU_EAGER_MODE="fused")
    rc, out = outs[0]
    assert rc == 3, out[-3000:]
    # The read of a result queued after the collective raises its error, with
    # the user's line of the collective; the group's next collective too.
    assert re.search(r"READ RAISED rank 0: c10d::allreduce_: tpu_dist: all_reduce failed on rank 0 "
                     r"\(collective #\d\)", out), out[-3000:]
    assert "(issued at " in out and "dist.all_reduce(" in out, out[-3000:]
    assert "RAISED rank 0" in out and "an earlier collective of this process group failed" in out, out[-3000:]
    assert outs[1][0] == 0
    assert took < 60


def _launched(index, path):
    import torch.distributed as dist
    dist.init_process_group("tpu_dist")
    x = torch.full((3,), float(index + 1), device=torch.device("tpu", index))
    dist.all_reduce(x)
    with open(os.path.join(path, f"rank{index}"), "w") as f:
        f.write(repr(x.cpu().tolist()))
    dist.destroy_process_group()


def test_launch_spawns_ranks(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHTPU_CPU_DEVICES", raising=False)
    torchtpu.distributed.launch(_launched, args=(str(tmp_path),), nprocs=2)
    for r in range(2):
        assert (tmp_path / f"rank{r}").read_text() == repr([3.0, 3.0, 3.0])


def _fails(index):
    if index == 1:
        raise ValueError("rank 1 fails")
    time.sleep(120)


def test_launch_stops_the_others_when_a_rank_fails():
    import torch.multiprocessing as mp
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match="rank 1 fails"):
        torchtpu.distributed.launch(_fails, nprocs=2)
    assert time.monotonic() - start < 60


def test_backend_is_registered_for_tpu_and_keeps_gloo_for_cpu():
    import torch.distributed as dist
    assert "tpu_dist" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"


def test_streams_and_events_order_work():
    dev = torchtpu.get_device()
    s = torch.tpu.Stream()
    x = torch.ones(64, 64, device=dev)
    with torch.tpu.stream(s):
        assert torch.tpu.current_stream() is s
        y = x @ x
    assert torch.tpu.current_stream() is torch.tpu.default_stream()
    torch.tpu.current_stream().wait_stream(s)
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    z = y + 1
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0 and end.query()
    torch.testing.assert_close(z.cpu(), torch.full((64, 64), 65.0))

"""torch.distributed on tpu: the c10d backend "tpu_dist" and `launch`.

    dist.init_process_group("tpu_dist")                         # or, with no backend:
    dist.init_process_group(device_id=torch.device("tpu", local_rank))

Collectives on tpu tensors go to the C++ backend (csrc/distributed): every
collective is first agreed on by all ranks (a mismatch raises on every rank),
then runs. On XLA:CPU, whose plugin has no cross-process collectives, it stages
the tensors through a Gloo backend on the host, counted in
`torchtpu.debug.metrics()["distributed"]`; all_reduce, all_gather_into_tensor
and reduce_scatter_tensor of tpu tensors return before they run (a CUDA
stream's semantics; csrc/distributed/staging.h). CPU tensors of the same group
run on that Gloo backend directly, after the same agreement.
"""
import datetime
import socket

import torch
import torch.distributed as dist

from . import _C, env

BACKEND = "tpu_dist"


def _create_backend(store, rank, size, timeout):
    """c10d's creator for "tpu_dist": the C++ backend over a Gloo backend of
    the same ranks (its own store prefix) for host staging."""
    from torch._C._distributed_c10d import ProcessGroupGloo
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    host = ProcessGroupGloo(dist.PrefixStore("tpu_dist_host/", store), rank, size, timeout)
    return _C._dist_backend(store, rank, size, timeout, host)


def thread_group(rank, world_size, name="threads", timeout=datetime.timedelta(minutes=5)):
    """A process group whose ranks are threads of this process: call it from
    each of `world_size` threads with its rank; rank r uses tpu device r.
    Collectives compile to StableHLO collectives (all_reduce, all_gather,
    reduce_scatter, all_to_all) and run as one XLA program on all the ranks'
    devices at once. Use it with the group= argument of torch.distributed's
    collectives, e.g. `dist.all_reduce(t, group=pg)`."""
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    backend = _C._dist_thread_backend(name, rank, world_size, timeout)
    pg = dist.ProcessGroup(rank, world_size)
    custom = dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(custom)
    pg._register_backend(torch.device("tpu"), custom, backend)
    # Group ranks are global ranks: what rooted collectives (broadcast, gather,
    # reduce) look up for a group.
    dist.distributed_c10d._world.pg_group_ranks[pg] = {r: r for r in range(world_size)}
    # Functional collectives (torch.compile's) find a group by its name, in a
    # registry of the process: each rank's group gets a name of its own.
    group_name = f"{name}:{rank}"
    pg._set_group_name(group_name)
    torch._C._distributed_c10d._unregister_process_group(group_name)
    torch._C._distributed_c10d._register_process_group(group_name, pg)
    return pg


def collective_programs():
    """The StableHLO text of each collective program compiled in this process
    for thread ranks (one per collective, dtype, size and device set)."""
    return list(_C._dist_collective_programs())


def _register() -> None:
    if not dist.is_available() or BACKEND.upper() in dist.Backend.backend_list or BACKEND in dist.Backend.backend_list:
        return
    # "cpu" too: CPU tensors of a tpu_dist group run on its Gloo backend (the
    # default backend for "cpu" stays gloo).
    dist.Backend.register_backend(BACKEND, _create_backend, devices=["tpu", "cpu"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(index, fn, args):
    env.export(RANK=index, LOCAL_RANK=index)
    fn(index, *args)


def launch(fn, args=(), nprocs=None, start_method="spawn", join=True):
    """Runs `fn(index, *args)` in `nprocs` new processes (default: one per tpu
    device), each with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    set for `dist.init_process_group`, and tpu device `index` for its own.
    Like `torch_xla.launch`. If a process fails, the others are stopped and
    the failure is raised here."""
    import torch.multiprocessing as mp
    if nprocs is None:
        nprocs = torch.tpu.device_count()
    with env.exported(WORLD_SIZE=nprocs, LOCAL_WORLD_SIZE=nprocs, MASTER_ADDR=env.get("MASTER_ADDR"),
                      MASTER_PORT=env.get("MASTER_PORT") or _free_port()):
        return mp.start_processes(_worker, args=(fn, tuple(args)), nprocs=nprocs, join=join,
                                  start_method=start_method)

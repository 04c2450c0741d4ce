"""torch.tpu against torch.cuda's public API and torch.accelerator: every
name has a working tpu counterpart or a stated reason, and the generic
accelerator functions read the same counters as torch.tpu's."""
import pickle

import pytest
import torch

import torchtpu  # noqa: F401
from torchtpu.device_api import CUDA_ONLY


def test_every_cuda_name_has_a_counterpart_or_a_reason():
    missing = [n for n in torch.cuda.__all__ if not hasattr(torch.tpu, n) and n not in CUDA_ONLY]
    assert missing == []
    for name, reason in CUDA_ONLY.items():
        assert name in torch.cuda.__all__ or hasattr(torch.cuda, name), name
        assert len(reason) > 10, name


def test_every_accelerator_function_works():
    # Graph: a class (CUDA graphs; CUDA_ONLY["CUDAGraph"] says why); *_idx: deprecated aliases.
    skip = {"Graph", "current_device_idx", "set_device_idx"}
    for name in torch.accelerator.__all__:
        if name in skip:
            continue
        fn = getattr(torch.accelerator, name)
        if name in ("set_device_index", "set_device_idx"):
            fn(0)
        elif name == "set_stream":
            fn(torch.accelerator.current_stream())
        elif name == "device_index":
            with fn(0):
                pass
        else:
            fn()
    assert torch.accelerator.current_accelerator() == torch.device("tpu")


def test_accelerator_memory_matches_torch_tpu():
    torch.tpu.synchronize()
    before = torch.accelerator.memory_allocated()
    assert before == torch.tpu.memory_allocated()
    torch.accelerator.reset_peak_memory_stats()
    x = torch.ones(1000, 3, device="tpu")
    assert torch.accelerator.memory_allocated() == before + x.untyped_storage().nbytes() == before + 12000
    assert torch.accelerator.max_memory_allocated() >= before + 12000
    assert torch.accelerator.memory_reserved() >= torch.accelerator.memory_allocated()
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_stats()["allocated_bytes.all.current"]
    assert stats["allocation.all.current"] == torch.tpu.memory_stats()["allocation.all.current"]
    free, total = torch.accelerator.get_memory_info()
    assert (free, total) == torch.tpu.mem_get_info()
    assert 0 < free <= total == torch.tpu.get_device_properties().total_memory
    del x
    assert torch.accelerator.memory_allocated() == before
    torch.accelerator.reset_accumulated_memory_stats()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.freed"] == 0


def test_capability_lists_the_dtypes_a_tensor_holds():
    dtypes = torch.accelerator.get_device_capability()["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.int64, torch.bool} <= dtypes
    for dt in dtypes:
        x = torch.arange(4).to(dt)
        assert torch.equal(x.to("tpu").cpu(), x), dt


def test_device_properties():
    p = torch.tpu.get_device_properties(0)
    assert p is torch.tpu.get_device_properties("tpu:0")
    assert torch.tpu.get_device_name() == p.name == "XLA:CPU"
    assert p.multi_processor_count >= 1 and p.total_memory > 2**20
    assert torch.tpu.get_device_capability() == (p.major, p.minor)
    assert "XLA:CPU" in repr(p)
    with pytest.raises(ValueError, match="out of range"):
        torch.tpu.get_device_properties(torch.tpu.device_count())


def test_memory_snapshot_lists_live_storages():
    x = torch.ones(777, device="tpu")
    y = torch.zeros(5, device="tpu")
    seg = {s["address"]: s for s in torch.tpu.memory_snapshot()}
    for t in (x, y):
        s = seg[t.untyped_storage().data_ptr()]
        assert s["total_size"] == t.untyped_storage().nbytes() and s["blocks"][0]["state"] == "active_allocated"
    addr = y.untyped_storage().data_ptr()
    del t, y
    assert addr not in {s["address"] for s in torch.tpu.memory_snapshot()}
    pickle.dumps(torch.tpu.memory._snapshot())


def test_memory_history_records_allocations_and_frees():
    torch.tpu.memory._record_memory_history(max_entries=10)
    try:
        z = torch.empty(33, device="tpu")
        addr = z.untyped_storage().data_ptr()
        del z
        trace = torch.tpu.memory._snapshot()["device_traces"][0]
        mine = [(e["action"], e["size"]) for e in trace if e["addr"] == addr]
        assert mine == [("alloc", 132), ("free_completed", 132)]
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    assert torch.tpu.memory._snapshot()["device_traces"][0] == []


def test_out_of_memory_error_is_torch_tpu_s():
    assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
    torch.tpu.set_per_process_memory_fraction(1e-9)
    try:
        with pytest.raises(torch.tpu.OutOfMemoryError, match="tpu out of memory"):
            torch.empty(1 << 20, device="tpu")
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)


def test_default_generators_drive_tpu_sampling():
    g = torch.tpu.default_generators[0]
    assert g.device == torch.device("tpu", 0)
    g.manual_seed(123)
    a = torch.rand(5, device="tpu").cpu()
    torch.tpu.manual_seed(123)
    assert torch.equal(torch.rand(5, device="tpu").cpu(), a)


def test_small_counterparts():
    assert torch.tpu.memory_cached() == torch.tpu.memory_reserved()
    assert torch.tpu.max_memory_cached() == torch.tpu.max_memory_reserved()
    assert torch.tpu.device_memory_used() == torch.tpu.memory_allocated()
    assert torch.tpu.get_arch_list() == ["cpu"]
    x = torch.ones(2, device="tpu")
    with torch.tpu.device_of(x):
        assert torch.tpu.current_device() == 0
    with pytest.raises(RuntimeError, match="NVML"):
        torch.tpu.utilization()

"""torch.tpu's memory statistics against hand-counted bytes (every storage
counted from creation to free), in every mode, and the per-process memory
fraction raising torch.OutOfMemoryError at the user's line."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")


def held():
    return torch.tpu.memory_allocated()


@pytest.mark.parametrize("dtype,shape", [(torch.float32, (10, 7)), (torch.bfloat16, (3, 5)), (torch.int64, ()),
                                         (torch.bool, (9,)), (torch.float32, (0, 4)), (torch.float64, (2, 3, 4))],
                         ids=str)
def test_allocated_counts_storage_bytes(dtype, shape):
    before = held()
    t = torch.ones(shape, dtype=dtype, device="tpu")
    nbytes = t.numel() * t.element_size()
    assert held() - before == nbytes
    view = t.view(-1)[: max(t.numel() - 1, 0)]  # a view holds no new bytes
    assert held() - before == nbytes
    u = (t + t) if dtype != torch.bool else (t | t)
    assert held() - before == 2 * nbytes
    del t, view, u
    assert held() == before
    assert torch.tpu.memory_reserved() >= held()


def test_peak_and_totals():
    torch.tpu.reset_peak_memory_stats()
    torch.tpu.reset_accumulated_memory_stats()
    base = held()
    assert torch.tpu.max_memory_allocated() == base
    a = torch.zeros(1000, device="tpu")
    b = torch.zeros(3000, device="tpu")
    del b
    c = torch.zeros(500, device="tpu")
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == base + 6000
    assert stats["allocated_bytes.all.peak"] == base + 16000
    assert stats["allocated_bytes.all.allocated"] == 18000
    assert stats["allocated_bytes.all.freed"] == 12000
    assert stats["allocation.all.allocated"] == 3 and stats["allocation.all.freed"] == 1
    assert torch.tpu.max_memory_allocated("tpu:0") == base + 16000
    torch.tpu.reset_peak_memory_stats(0)
    assert torch.tpu.max_memory_allocated(torch.device("tpu")) == base + 6000
    del a, c
    assert held() == base


def test_mem_get_info_and_summary():
    free, total = torch.tpu.mem_get_info()
    assert total > 0 and 0 <= free <= total
    t = torch.zeros(1 << 20, device="tpu")
    free2, total2 = torch.tpu.mem_get_info()
    assert total2 == total and free - free2 == 4 << 20
    text = torch.tpu.memory_summary()
    assert "Allocated memory" in text and "tpu:0" in text
    del t
    with pytest.raises(ValueError, match="expected a tpu device"):
        torch.tpu.memory_allocated("cpu")
    with pytest.raises(ValueError, match="out of range"):
        torch.tpu.memory_allocated(99)


def test_memory_fraction_raises_out_of_memory():
    total = torch.tpu.mem_get_info()[1]
    ooms = torch.tpu.memory_stats()["num_ooms"]
    fraction = (held() + (2 << 20)) / total  # room for 2 MiB more
    torch.tpu.set_per_process_memory_fraction(fraction)
    try:
        assert torch.tpu.get_per_process_memory_fraction() == fraction
        ok = torch.zeros(1 << 17, device="tpu")  # 512 KiB fits
        with pytest.raises(torch.OutOfMemoryError, match=r"(?s)set_per_process_memory_fraction.*test_memory.py"):
            torch.zeros(1 << 20, device="tpu")  # 4 MiB does not
        assert torch.tpu.memory_stats()["num_ooms"] == ooms + 1
        y = ok * 2  # the device still works
        assert y.sum().item() == 0
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    torch.zeros(1 << 20, device="tpu")
    with pytest.raises(ValueError, match="Allowed range"):
        torch.tpu.set_per_process_memory_fraction(1.5)

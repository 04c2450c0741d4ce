"""PyTorch's memory-overlap rules and storage semantics on the device against
the CPU, in every mode: writes through expanded and overlapping views, copies
and out= tensors that overlap their inputs, set_ past a storage's end, and
the checks PyTorch makes before computing."""
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

OVERLAP = "some elements of the input tensor and the written-to tensor refer to a single memory location"
INTERNAL = "more than one element of the written-to tensor refers to a single memory location"


def on_both(fn):
    """fn("cpu") and fn("tpu") give equal tensors."""
    expected, got = fn("cpu"), fn("tpu").cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


def raises_on_both(fn, exc, match):
    for dev in ("cpu", "tpu"):
        with pytest.raises(exc, match=match):
            r = fn(dev)
            if dev == "tpu":
                r.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_fill_with_a_number_and_zero_write_expanded_tensors(dtype):
    def fill(dev):
        base = torch.zeros(1, 3, dtype=dtype, device=dev)
        base.expand(4, 3).fill_(1)
        return base

    def fill_tensor(dev):  # fill_ with a 0-d tensor refuses, as the CPU's
        base = torch.ones(2, 1, 3, dtype=dtype, device=dev)
        return base.expand(2, 5, 3).fill_(torch.tensor(0, dtype=dtype))

    def zero(dev):
        base = torch.ones(3, 1, dtype=dtype, device=dev)
        view = base.expand(3, 4)
        view.zero_()
        return torch.cat([base.flatten(), view.flatten()])

    on_both(fill)
    on_both(zero)
    raises_on_both(fill_tensor, RuntimeError, INTERNAL)
    # Other in-place ops refuse an expanded destination, as the CPU's.
    raises_on_both(lambda d: torch.zeros(1, 3, dtype=dtype, device=d).expand(4, 3).add_(1)
                   if dtype != torch.bool else torch.zeros(1, 3, device=d).expand(4, 3).mul_(2),
                   RuntimeError, INTERNAL)


def test_fill_of_an_overlapping_view_writes_every_element():
    def fill(dev):
        x = torch.zeros(8, device=dev)
        x.as_strided((4, 3), (1, 1), 1).fill_(5)
        return x
    on_both(fill)


@pytest.mark.parametrize("case", ["copy_shifted", "copy_into_slice", "out_add", "out_mul_slices", "out_cat"])
def test_partial_overlap_of_input_and_output_raises(case):
    fns = {
        "copy_shifted": lambda d: torch.arange(10., device=d)[2:8].copy_(torch.arange(10., device=d)[0:6]),
        "copy_into_slice": lambda d: (lambda x: x[2:8].copy_(x[0:6]))(torch.arange(10., device=d)),
        "out_add": lambda d: (lambda x: torch.add(x[0:6], 1, out=x[2:8]))(torch.arange(10., device=d)),
        "out_mul_slices": lambda d: (lambda x: torch.mul(x[1:5], x[0:4], out=x[0:4]))(torch.arange(10., device=d)),
        "out_cat": lambda d: (lambda x: torch.cat([x[0:2], x[4:6]], out=x[1:5]))(torch.arange(10., device=d)),
    }
    if case == "copy_shifted":  # different storages: no overlap, a plain copy
        on_both(fns[case])
    else:
        raises_on_both(fns[case], RuntimeError, OVERLAP)


def test_full_overlap_and_disjoint_views_are_allowed():
    def same_view(dev):
        x = torch.arange(10., device=dev)
        torch.add(x[0:6], 1, out=x[0:6])  # out is the input: fine
        x[6:8].copy_(x[6:8])
        torch.mul(x[0:3], 2, out=x[5:8])  # disjoint
        return x

    def transposed(dev):
        # The same elements in another order: PyTorch calls that partial too.
        x = torch.arange(9., device=dev).view(3, 3)
        return x.t().clone().copy_(x)
    on_both(same_view)
    on_both(transposed)
    raises_on_both(lambda d: (lambda x: x.copy_(x.t()))(torch.arange(9., device=d).view(3, 3)), RuntimeError, OVERLAP)


def test_set_past_the_storage_end_grows_it():
    def grow(dev):
        s = torch.arange(4., device=dev)
        t = torch.empty(0, device=dev)
        t.set_(s.untyped_storage(), 6, (2,), (1,))
        t.fill_(7)
        assert s.untyped_storage().nbytes() == 32
        return torch.cat([s, t, torch.tensor(s.untyped_storage().nbytes(), dtype=torch.float32, device=dev)[None]])

    def strided(dev):
        s = torch.arange(3, device=dev)
        t = torch.empty(0, dtype=torch.int64, device=dev).set_(s.untyped_storage(), 1, (2, 2), (3, 1))
        t.zero_()
        return torch.cat([s, torch.tensor([s.untyped_storage().nbytes()], device=dev)])
    on_both(grow)
    on_both(strided)
    raises_on_both(lambda d: torch.empty(0, device=d).set_(torch.zeros(2, device=d).untyped_storage(), -1, (1,), (1,)),
                   RuntimeError, "offset")


@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float64])
def test_vector_norm_refuses_integer_input_even_with_dtype(dtype):
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
            torch.linalg.vector_norm(torch.arange(4, device=dev), dtype=dtype)
    on_both(lambda d: torch.linalg.vector_norm(torch.arange(4., device=d), dtype=torch.float64))


def test_platform_info_measures_denormals():
    info = torchtpu.platform_info()
    assert info["platform"] == torchtpu.platform() and info["device_count"] == torch.tpu.device_count()
    tiny = torch.tensor([1e-40])
    computed = (tiny.to("tpu") * torch.tensor(1.0, device="tpu")).cpu()
    assert info["denormals"] == ("preserved" if computed[0] == tiny[0] else "flushed to zero")
    assert tiny.to("tpu").cpu()[0] == tiny[0]  # copies keep them either way


@pytest.mark.parametrize("dtype,value", [(torch.int8, 300), (torch.int32, 2**40), (torch.float16, 1e6),
                                         (torch.float8_e4m3fn, 1e4), (torch.uint8, -1), (torch.bool, 2),
                                         (torch.float32, float("inf")), (torch.bfloat16, 1e38)])
def test_fill_converts_its_number_as_the_cpu(dtype, value):
    """fill_ (and torch.full) raise the CPU's overflow error where the number
    does not fit the dtype, and fill what the CPU fills otherwise."""
    fills = (lambda d: torch.full((3,), value, dtype=dtype, device=d),
             lambda d: torch.zeros(2, 2, dtype=dtype, device=d).fill_(value))
    for fn in fills:
        try:
            fn("cpu")
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match="without overflow"):
                fn("tpu")
            assert "without overflow" in str(e)
            continue
        on_both(fn)

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


def _through(view, op):
    """Applies `op` to `view(base)` and returns the base."""
    def run(dev):
        base = torch.arange(-3., 5., device=dev)
        op(view(base), dev)
        return base
    return run


VIEWS = {
    "unfold": lambda x: x.unfold(0, 3, 1),                # [6, 3], strides [1, 1]
    "as_strided": lambda x: x.as_strided((3, 3), (1, 1)),
    "interleaved": lambda x: x.as_strided((2, 3), (2, 1), 1),
    "unfold_t": lambda x: x.unfold(0, 2, 2).t(),           # no overlap: the device's own path
}
INPLACE = {
    "add_number": lambda v, d: v.add_(1),
    "mul_number": lambda v, d: v.mul_(2),
    "add_tensor": lambda v, d: v.add_(torch.arange(v.numel(), dtype=v.dtype, device=d).view(v.shape)),
    "sub_itself": lambda v, d: v.sub_(v, alpha=0.5),
    "addcmul_": lambda v, d: v.addcmul_(torch.full(v.shape, 2., device=d), torch.full(v.shape, 3., device=d)),
    "clamp_": lambda v, d: v.clamp_(max=1),
    "index_put_": lambda v, d: v.index_put_((torch.tensor([0, 1], device=d),), torch.tensor(5., device=d)),
    "masked_fill_": lambda v, d: v.masked_fill_(torch.ones(v.shape, dtype=torch.bool, device=d), 7),
    "neg_": lambda v, d: v.neg_(),
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("op", list(INPLACE))
def test_inplace_ops_through_views_that_overlap_themselves_give_the_cpus_values(view, op):
    """PyTorch's CPU applies an in-place op once per element of a view whose
    elements share memory (a location referred to twice is updated twice);
    the device gives the same values."""
    on_both(_through(VIEWS[view], INPLACE[op]))


def test_a_write_through_an_overlapping_view_keeps_autograd_and_later_ops():
    def run(dev):
        w = torch.arange(6., device=dev, requires_grad=True)
        x = w * 1
        x.unfold(0, 2, 1).mul_(2)
        (x * x).sum().backward()
        return torch.cat([x.detach(), w.grad])
    on_both(run)


@pytest.mark.parametrize("case", ["add_", "mul_", "addcmul_", "lerp_"])
def test_inplace_ops_whose_input_partly_overlaps_self_raise(case):
    fns = {
        "add_": lambda x: x[1:].add_(x[:-1]),
        "mul_": lambda x: x[:4].mul_(x[2:6]),
        "addcmul_": lambda x: x[2:].addcmul_(x[:-2], torch.ones(6, device=x.device)),
        "lerp_": lambda x: x[1:].lerp_(x[:-1], 0.5),
    }
    raises_on_both(lambda d: fns[case](torch.arange(8., device=d)), RuntimeError, OVERLAP)


def test_inplace_ops_on_the_same_elements_or_apart_are_allowed():
    def run(dev):
        x = torch.arange(8., device=dev)
        x[:4].add_(x[:4])
        x[:4].mul_(x[4:])
        x[::2].lerp_(x[1::2], 0.25)
        return x
    on_both(run)


def test_an_input_that_is_part_of_self_raises():
    raises_on_both(lambda d: (lambda x: x.add_(x[0]))(torch.arange(8., device=d)), RuntimeError, OVERLAP)


NO_OVERLAP = {  # PyTorch's CPU refuses any overlap between self and an input (assert_no_overlap)
    "index_add_": lambda x, d: x[1:5].index_add_(0, torch.tensor([0, 1], device=d), x[0:2]),
    "index_add_full": lambda x, d: x[0:2].index_add_(0, torch.tensor([0, 1], device=d), x[0:2]),
    "index_copy_": lambda x, d: x[1:5].index_copy_(0, torch.tensor([0, 1], device=d), x[0:2]),
    "index_reduce_": lambda x, d: x[1:5].index_reduce_(0, torch.tensor([0, 1], device=d), x[0:2], "prod"),
    "put_": lambda x, d: x[1:5].put_(torch.tensor([0, 1], device=d), x[0:2]),
    "index_put_": lambda x, d: x[1:5].index_put_((torch.tensor([0, 1], device=d),), x[0:2]),
}


@pytest.mark.parametrize("op", list(NO_OVERLAP))
def test_index_writes_refuse_an_overlapping_source(op):
    raises_on_both(lambda d: NO_OVERLAP[op](torch.arange(8., device=d), d), RuntimeError, OVERLAP)


READ_WHILE_WRITING = {  # the CPU computes these, reading what it has written
    "masked_scatter_": lambda x, d: x[1:5].masked_scatter_(torch.tensor([False, True, True, True], device=d), x[0:4]),
    "masked_scatter_same": lambda x, d: x[1:5].masked_scatter_(torch.tensor([False, True, True, True], device=d),
                                                               x[1:5]),
    "addmv_": lambda x, d: x.view(4, 4)[0, 1:].addmv_(x.view(4, 4)[1:, 1:], x.view(4, 4)[0, :3]),
    "addmm_": lambda x, d: x[:4].view(2, 2).addmm_(x[2:6].view(2, 2), torch.ones(2, 2, device=d)),
    "baddbmm_": lambda x, d: x.view(4, 4)[None, :2, :2].baddbmm_(x.view(4, 4)[None, 1:3, :2],
                                                                 x.view(4, 4)[None, :2, :2]),
    "addbmm_": lambda x, d: x.view(4, 4)[:2, :2].addbmm_(x.view(1, 4, 4)[:, :2, :2], x.view(1, 4, 4)[:, :2, 1:3]),
    "add_not_dense": lambda x, d: x.view(4, 4)[:, 1:3].add_(x.view(4, 4)[:, 0:2]),
    "lerp_not_dense": lambda x, d: x.view(4, 4)[:, 1:3].lerp_(x.view(4, 4)[:, 0:2], 0.5),
}


@pytest.mark.parametrize("op", list(READ_WHILE_WRITING))
def test_ops_reading_memory_they_write_give_the_cpus_values(op):
    def run(dev):
        x = torch.arange(16., device=dev)
        READ_WHILE_WRITING[op](x, dev)
        return x
    on_both(run)


def test_interleaved_views_share_a_span_not_elements_and_stay_on_the_device():
    def run(dev):
        x = torch.arange(2 * 3 * 8., device=dev).view(2, 3, 8)
        x[..., ::2].add_(x[..., 1::2])           # even and odd places: apart
        x[:, 1::2].mul_(x[:, ::2][:, :1])        # rows 1 and 0 of each block
        x.view(-1)[::3].sub_(x.view(-1)[1::3])
        return x
    torchtpu.debug.reset_metrics()
    on_both(run)
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}

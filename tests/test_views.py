"""Storage and view semantics (DESIGN decision 5): every sequence runs on the
CPU and on the tpu device, and every tensor it returns must match."""
import pytest
import torch

import torchtpu  # noqa: F401

pytestmark = pytest.mark.usefixtures("each_mode")


def base(*shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    return torch.arange(n, dtype=dtype).reshape(shape)


def same_on_both(fn, *inputs):
    """Runs fn on CPU copies and tpu copies of `inputs`; compares results and
    the (possibly mutated) inputs."""
    cpu_in = [x.clone() for x in inputs]
    tpu_in = [x.to("tpu") for x in inputs]
    cpu_out = fn(*cpu_in)
    tpu_out = fn(*tpu_in)
    if not isinstance(cpu_out, (tuple, list)):
        cpu_out, tpu_out = [cpu_out], [tpu_out]
    for i, (c, t) in enumerate(zip(cpu_out, tpu_out)):
        assert t.device.type == "tpu", f"result {i} is on {t.device}"
        assert t.shape == c.shape and t.stride() == c.stride(), f"result {i}: {t.shape}/{t.stride()} vs " \
                                                                f"{c.shape}/{c.stride()}"
        assert torch.equal(t.cpu(), c), f"result {i}:\n{t.cpu()}\nvs CPU\n{c}"
    for i, (c, t) in enumerate(zip(cpu_in, tpu_in)):
        assert torch.equal(t.cpu(), c), f"input {i}:\n{t.cpu()}\nvs CPU\n{c}"
    return tpu_out


def test_select_row_add_():
    def f(x):
        x[0].add_(1)
        return x
    same_on_both(f, base(3, 4))


def test_transpose_mul_():
    def f(x):
        x.t().mul_(2)
        return x, x.t()
    same_on_both(f, base(3, 4))


def test_transpose_partial_write():
    def f(x):
        x.t()[1:3].mul_(-1)
        return x
    same_on_both(f, base(3, 4))


def test_view_setitem():
    def f(x):
        x.view(-1)[3] = 7
        return x
    out = same_on_both(f, base(3, 4))
    assert out[0][0, 3].item() == 7


def test_expand_reads():
    def f(x):
        e = x.expand(4, 3, 5)
        return e, e + 1, e.sum(0), e.contiguous()
    same_on_both(f, base(3, 1))
    same_on_both(lambda x: (x.expand(2, -1), x.expand(2, -1) * 3), base(5))


def test_narrow():
    def f(x):
        n = x.narrow(1, 1, 2)
        r = n * 10
        n.add_(100)
        return n, r, x
    same_on_both(f, base(3, 4))


def test_select():
    def f(x):
        s = x.select(1, 2)
        r = s.clone()
        s.fill_(-1)
        return s, r, x.select(0, 1)
    same_on_both(f, base(3, 4))


def test_diagonal_read_and_fill():
    def f(x):
        d = x.diagonal()
        r = d * 1
        x.diagonal().fill_(0)
        o = x.diagonal(offset=1)
        o.add_(5)
        return r, d, o, x
    same_on_both(f, base(4, 4))
    same_on_both(lambda x: (x.diagonal(dim1=1, dim2=2), x.diagonal(offset=-1, dim1=0, dim2=2)), base(3, 4, 4))


def test_as_strided_read():
    def f(x):
        return (x.as_strided((2, 3), (1, 2)), x.as_strided((3, 2), (4, 1), 2), x.as_strided((2, 2), (0, 3), 1),
                x.as_strided((4,), (3,), 0))
    same_on_both(f, base(12))


def test_as_strided_overlapping_read():
    def f(x):
        windows = x.as_strided((4, 3), (2, 1))  # rows overlap, like unfold
        return windows, windows * 2, x.unfold(0, 3, 2), x.unfold(0, 4, 1).sum(1)
    same_on_both(f, base(10))
    same_on_both(lambda x: x.unfold(1, 2, 1), base(3, 5))


def test_as_strided_write():
    def f(x):
        s = x.as_strided((2, 3), (4, 1), 1)
        s.mul_(-1)
        t = x.as_strided((3,), (5,), 0)
        t.copy_(torch.tensor([100.0, 200.0, 300.0]).to(x.device))
        return x, s, t
    same_on_both(f, base(12))


def test_overlapping_write_raises_like_cpu():
    for dev in ("cpu", "tpu"):
        x = base(3, 1).to(dev)
        with pytest.raises(RuntimeError, match="single memory location"):
            x.expand(3, 4).add_(1)


def test_chained_views():
    def f(x):
        v = x.view(4, 6)[1:, ::2].t()[1]
        r = v.clone()
        v.sub_(1000)
        w = x[1].transpose(0, 1)[2:].narrow(1, 1, 2)
        w.mul_(3)
        return r, v, w, x
    same_on_both(f, base(2, 3, 4))


def test_inplace_seen_by_all_aliases():
    x = base(4, 5).to("tpu")
    ref = base(4, 5)
    a, b, flat = x[1:3], x.t(), x.view(-1)
    a_ref, b_ref, flat_ref = ref[1:3], ref.t(), ref.view(-1)
    b[2].mul_(10)
    b_ref[2].mul_(10)
    flat[::3].add_(1)
    flat_ref[::3].add_(1)
    for t, r in ((x, ref), (a, a_ref), (b, b_ref), (flat, flat_ref)):
        assert torch.equal(t.cpu(), r)


def test_data_ptr():
    x = torch.zeros(3, 4, device="tpu")
    y = torch.zeros(3, 4, device="tpu")
    assert x.data_ptr() != y.data_ptr()
    assert x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr()
    assert x.view(-1).data_ptr() == x.data_ptr()
    assert x.t().data_ptr() == x.data_ptr()
    assert x[1].data_ptr() == x.data_ptr() + x.stride(0) * x.element_size()
    assert x[1, 2:].data_ptr() == x.data_ptr() + (x.stride(0) + 2) * x.element_size()
    assert x[1].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert x.clone().data_ptr() != x.data_ptr()
    h = torch.zeros(3, 4, dtype=torch.float16, device="tpu")
    assert h[2].data_ptr() == h.data_ptr() + 2 * 4 * 2
    # Distinct live storages never overlap.
    ptrs = sorted((t.data_ptr(), t.untyped_storage().nbytes()) for t in (x, y, h))
    for (p0, n0), (p1, _) in zip(ptrs, ptrs[1:]):
        assert p0 + n0 <= p1


def test_resize_preserves_contents():
    def f(x):
        x.resize_(20)
        head = x[:12].clone()
        x.resize_(2, 3)
        return head, x
    same_on_both(f, base(3, 4))


def test_contiguous_of_transpose():
    def f(x):
        t = x.t()
        c = t.contiguous()
        c.add_(1)  # a new storage: x is untouched
        return t, c, x
    out = same_on_both(f, base(3, 4))
    assert not out[0].is_contiguous() and out[1].is_contiguous()
    assert out[1].data_ptr() != out[0].data_ptr()


def test_clone_independence():
    x = base(3, 4).to("tpu")
    c = x.clone()
    c.mul_(2)
    x[0].fill_(-1)
    expect_x = base(3, 4)
    expect_x[0] = -1
    assert torch.equal(x.cpu(), expect_x)
    assert torch.equal(c.cpu(), base(3, 4) * 2)
    assert c.data_ptr() != x.data_ptr()


def test_copy_from_cpu_into_view():
    x = torch.zeros(3, 4, device="tpu")
    ref = torch.zeros(3, 4)
    col = torch.tensor([1.0, 2.0, 3.0])
    x[:, 1].copy_(col)
    ref[:, 1].copy_(col)
    assert torch.equal(x.cpu(), ref)
    x[1:, 2:].copy_(torch.tensor([[7.0, 8.0], [9.0, 10.0]]))
    ref[1:, 2:].copy_(torch.tensor([[7.0, 8.0], [9.0, 10.0]]))
    assert torch.equal(x.cpu(), ref)
    x.t()[3].copy_(torch.tensor(5.0))  # 0-d broadcast
    ref.t()[3].copy_(torch.tensor(5.0))
    assert torch.equal(x.cpu(), ref)


def test_copy_into_cpu_view_from_tpu():
    src = base(3, 4).to("tpu")
    dst = torch.zeros(4, 3)
    dst.t().copy_(src)
    assert torch.equal(dst, base(3, 4).t())
    out = torch.zeros(3)
    out.copy_(src[:, 2])
    assert torch.equal(out, base(3, 4)[:, 2])


def test_copy_with_dtype_conversion():
    f = torch.tensor([[1.7, -2.5, 3.0], [255.9, 0.0, -0.4]])
    x = torch.zeros(2, 3, dtype=torch.int32, device="tpu")
    x.copy_(f.to("tpu"))
    assert torch.equal(x.cpu(), torch.zeros(2, 3, dtype=torch.int32).copy_(f))
    y = torch.zeros(2, 3, dtype=torch.float16, device="tpu")
    y.copy_(f)  # from cpu with conversion
    assert torch.equal(y.cpu(), f.to(torch.float16))
    z = torch.zeros(3, 2, dtype=torch.float64, device="tpu")
    z.t().copy_(torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.int64).to("tpu"))
    assert torch.equal(z.cpu(), torch.tensor([[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], dtype=torch.float64))
    b = torch.zeros(2, 3, dtype=torch.bool, device="tpu")
    b.copy_(f.to("tpu"))
    assert torch.equal(b.cpu(), f != 0)
    c = f.to("tpu").to(torch.bfloat16)
    assert torch.equal(c.cpu(), f.to(torch.bfloat16))
    back = torch.zeros(2, 3, dtype=torch.float64)
    back.copy_(c)  # tpu bf16 -> cpu f64
    assert torch.equal(back, f.to(torch.bfloat16).to(torch.float64))


def test_views_of_other_dtypes():
    def f(x):
        v = x[1:]
        v.mul_(2)
        return v, x
    for dt in (torch.int64, torch.bfloat16, torch.int8, torch.float64):
        same_on_both(f, base(3, 4, dtype=dt))


def test_dtype_views_share_bytes():
    def f(x):
        i = x.view(torch.int32)
        i[0, 0] = 1065353216  # the bits of 1.0f
        u = x.view(torch.uint8)
        u[1, 3] = 64  # highest byte of x[0, 0] -> bits 0x403f... on little endian
        h = x.view(torch.float16)
        return x, i, u, h, x[1:].view(torch.int16)
    same_on_both(f, base(3, 4))
    same_on_both(lambda x: (x.view(torch.float32), x[2:].view(torch.float32) * 2), base(8).view(torch.int16))


def test_set_storage_view():
    def f(x):
        y = torch.empty(0, device=x.device)
        y.set_(x.untyped_storage(), 2, (2, 3), (1, 2))
        y.mul_(10)
        return x, y
    same_on_both(f, base(3, 4))


def test_resize_keeps_existing_views():
    def f(x):
        v = x[1]
        x.resize_(30)
        x[12:].fill_(1)
        return v, x[:12]
    same_on_both(f, base(3, 4))


def test_storage_read_as_wider_dtype():
    # 7 bytes read as int16: the whole-element prefix, as on the CPU.
    def f(x):
        y = torch.empty(0, dtype=torch.int16, device=x.device)
        y.set_(x.untyped_storage(), 0, (3,), (1,))
        return y, y + 1
    same_on_both(f, torch.arange(7, dtype=torch.uint8) * 37)

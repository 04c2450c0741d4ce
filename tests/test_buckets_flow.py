"""Bucketed values flowing between programs: under torch.compile a graph
captured again at a new size runs as its bucket's program; a bucketed
program's padded output reaches the next bucketed program as it is (a
forward's saved activations reach the backward without being cut back), and
is cut back to its exact size only when something else reads it. The suite
fills padding with NaN (conftest), so a padded element that reached a real
one would show."""
import time

import pytest
import torch

import torchtpu


def _compiled(where):
    """The compilations since reset_metrics() of programs issued from function `where`: large
    ones (a new program, shape or bucket), and a bucket's small pad and cut back programs."""
    events = [e for e in torchtpu.debug.recompiles() if e["site"].endswith(" in " + where)]
    helpers = torchtpu.debug.metrics()["compilations_by_cause"]["bucket_padding"]
    return len([e for e in events if e["cause"] != "bucket_padding"]), helpers


def attention_loss(q, k, v):
    """Attention whose weights ([n, n], growing as the square of n) are saved for the backward."""
    w = (q @ k.transpose(-1, -2) / 8).softmax(-1)
    return (w @ v).tanh().sum() + w.amax(-1).mean()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_compiled_forward_and_backward_compile_per_bucket(mode):
    torch._dynamo.reset()
    fn = torch.compile(attention_loss, backend="tpu")
    torch.manual_seed(0)
    big, helpers = {}, {}
    with torchtpu.eager_mode(mode):
        for n in (20, 24, 28, 31, 17, 40, 63, 64, 48, 33):
            cpu = [torch.randn(2, 3, n, 8, requires_grad=True) for _ in range(3)]
            dev = [t.detach().to("tpu").requires_grad_() for t in cpu]
            torchtpu.synchronize()
            torchtpu.debug.reset_metrics()
            got = fn(*dev)
            got.backward()
            torchtpu.synchronize()
            big[n], helpers[n] = _compiled("attention_loss")
            grads = [t.grad.cpu() for t in dev]
            want = attention_loss(*cpu)
            want.backward()
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
            for g, t in zip(grads, cpu):
                torch.testing.assert_close(g, t.grad, rtol=1e-5, atol=1e-5)
        stats = torchtpu.debug.metrics()["buckets"]
    # Three sizes tell the [n, n] weights' size from a line; from then on one program per bucket.
    assert big[31] == big[17] == 0 and big[63] == big[64] == big[48] == big[33] == 0, (big, stats)
    # A new size compiles only the pad of the inputs and the cut back of the gradients: the saved
    # activations pass from the forward to the backward padded.
    assert helpers[31] <= 2 and helpers[48] <= 2, helpers


def test_values_pass_padded_between_programs_and_are_cut_back_when_read():
    torch.manual_seed(0)
    with torchtpu.eager_mode("fused"):
        torchtpu.debug.reset_metrics()
        for n in (20, 24, 28, 17, 30, 26):
            x = torch.randn(3, n, 4)
            xd = x.to("tpu")
            y, yd = torch.tanh(x).cumsum(1) * 2, torch.tanh(xd).cumsum(1) * 2
            torchtpu.synchronize()  # y's program ends here: y stays padded
            z, zd = (y * y).softmax(1).sum(1), (yd * yd).softmax(1).sum(1)
            yd.mul_(3)  # an update of the padded value, in its own program
            y.mul_(3)
            torchtpu.synchronize()
            torch.testing.assert_close(zd.cpu(), z)
            torch.testing.assert_close(yd.cpu(), y)  # cut back on this read
            torch.testing.assert_close(yd[:, -1].cpu(), y[:, -1])
        stats = torchtpu.debug.metrics()["buckets"]
    assert stats["programs"] >= 6, stats


def test_a_padded_value_read_by_an_exact_program():
    """A value a bucketed program left padded, read by a program that does not bucket (a sort
    along the varying dim): it is cut back first."""
    torch.manual_seed(0)
    with torchtpu.eager_mode("fused"):
        for n in (20, 24, 28, 30):
            x = torch.randn(2, n)
            yd = (x.to("tpu") * 2).exp()
            torchtpu.synchronize()
            torch.testing.assert_close(torch.sort(yd, dim=1).values.cpu(), torch.sort((x * 2).exp(), dim=1).values)


@pytest.mark.parametrize("compiled", [False, True])
def test_warmup_compiles_every_bucket_before_use(compiled):
    torch.manual_seed(0)
    if compiled:
        torch._dynamo.reset()
    w = torch.randn(8, 8)
    wd = w.to("tpu")

    def forward(x, w):
        h = torch.tanh(x @ w)
        return (h @ h.transpose(1, 2)).softmax(-1).sum(1), h.mean(1)

    fn = torch.compile(forward, backend="tpu") if compiled else forward
    with torchtpu.eager_mode("fused"), torch.no_grad():
        assert torchtpu.bucket_sizes(64) == [16, 32, 64]
        sizes = torchtpu.warmup(fn, lambda n: (torch.randn(2, n, 8).to("tpu"), wd), max_size=64)
        assert set(sizes) >= {16, 32, 64}
        torchtpu.synchronize()
        torchtpu.debug.reset_metrics()
        for n in (2, 5, 17, 33, 48, 64, 23, 15):
            x = torch.randn(2, n, 8)
            for g, r in zip(fn(x.to("tpu"), wd), forward(x, w)):
                torch.testing.assert_close(g.cpu(), r, rtol=1e-5, atol=1e-5)
        big, _ = _compiled("forward")
    assert big == 0, torchtpu.debug.recompiles()
    with pytest.raises(ValueError, match="max_size"):
        torchtpu.warmup(fn, lambda n: (), max_size=1, min_size=4)



def test_background_warmup_compiles_while_the_caller_goes_on():
    torch.manual_seed(0)
    w = torch.randn(8, 8)
    wd = w.to("tpu")

    def encode(x, w):
        return torch.tanh(x @ w).softmax(-1).sum(1)

    with torchtpu.eager_mode("fused"), torch.no_grad():
        job = torchtpu.warmup(encode, lambda n: (torch.randn(2, n, 8).to("tpu"), wd), max_size=64, background=True)
        # Meanwhile this thread computes other things at a fixed size, results as on the CPU.
        a = torch.randn(5, 5)
        for _ in range(20):
            a = (a @ a.T).tanh()
            ad = a.to("tpu")
            torch.testing.assert_close((ad @ ad.T).tanh().cpu(), (a @ a.T).tanh())
        sizes = job.wait(timeout=300)
        assert job.done() and set(sizes) >= {16, 32, 64}
        torchtpu.synchronize()
        torchtpu.debug.reset_metrics()
        for n in (5, 17, 33, 48, 64, 23, 15):
            x = torch.randn(2, n, 8)
            torch.testing.assert_close(encode(x.to("tpu"), wd).cpu(), encode(x, w), rtol=1e-5, atol=1e-5)
        big, _ = _compiled("encode")
    assert big == 0, torchtpu.debug.recompiles()

    def bad_inputs(n):
        raise RuntimeError(f"no inputs at size {n}")

    job = torchtpu.warmup(encode, bad_inputs, max_size=8, background=True)
    with pytest.raises(RuntimeError, match="no inputs at size"):
        job.wait(timeout=60)


@pytest.mark.parametrize("mode", ["fused", "strict", "compiled"])
def test_a_new_smaller_bucket_runs_on_a_larger_compiled_one_while_it_compiles(mode):
    """After sizes 100 and 90 (the bucket of 128, compiled at once: nothing
    larger is), size 24 needs the bucket of 32. In Strict and Fused Eager,
    and for torch.compile's forward and backward graphs, it runs on the
    program of 128 while that of 32 compiles in the background, counted at
    once (so counts do not depend on timing); once it is compiled, sizes of
    that bucket run on it and nothing compiles. Results and gradients are
    the CPU's throughout (NaN padding)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    d = {"fused": 19, "strict": 21, "compiled": 23}[mode]  # widths no other test uses: programs of their own
    w = torch.randn(d, d, requires_grad=True)
    wd = w.detach().to("tpu").requires_grad_()

    def f(x, w):
        return (torch.tanh(x @ w).softmax(1) * 2).sum(1)

    run = torch.compile(f, backend="tpu", dynamic=False) if mode == "compiled" else f

    def check(n):
        x = torch.randn(3, n, d)
        got = run(x.to("tpu"), wd)
        want = f(x, w)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        got.square().sum().backward()
        want.square().sum().backward()
        torch.testing.assert_close(wd.grad.cpu(), w.grad, rtol=1e-4, atol=1e-5)

    def counts():
        m = torchtpu.debug.metrics()
        return m["compilations_by_cause"]["new_bucket"], m["buckets"]["stand_ins"]

    counted = []  # (new bucket programs, stand-in runs) at points of the sequence

    def sizes():
        yield from (100, 100, 90)
        counted.append(counts())
        yield 24
        counted.append(counts())
        deadline = time.monotonic() + 120
        while torchtpu.debug.metrics()["buckets"]["compiling"]:  # 32's programs
            assert time.monotonic() < deadline, "the bucket of 32 never compiled"
            yield 24  # meanwhile on the program of 128
        counted.append(counts())
        yield from (30, 25, 32, 24)  # (Strict: mm sees [3n, d], 75..96: the bucket of 128 too)
        counted.append(counts())

    with torchtpu.eager_mode("strict" if mode == "compiled" else mode):
        torchtpu._C._set_buckets([0])  # no remembered sizes
        for n in sizes():  # one line: Strict's places in the op stream include the caller's
            check(n)
    (buckets0, stand0), (buckets1, stand1), (buckets2, stand2), after = counted
    assert buckets1 > buckets0
    assert stand1 > stand0
    assert buckets2 == buckets1  # counted when it started
    assert after == (buckets2, stand2)


def test_no_stand_in_when_its_outputs_would_crowd_the_device_memory():
    """A larger bucket's program stands in only while its outputs take at
    most half the device's free memory: with the capacity just above what
    is held, size 24 compiles the bucket of 32 at once instead of running
    padded to 128, and the result is the CPU's."""
    torch.manual_seed(0)
    d = 25  # a width no other test uses
    w = torch.randn(d, d)
    wd = w.to("tpu")

    def check(n):
        x = torch.randn(3, n, d)
        torch.testing.assert_close(torch.tanh(x.to("tpu") @ wd).cpu(), torch.tanh(x @ w), rtol=1e-5, atol=1e-5)

    def stand_ins():
        return torchtpu.debug.metrics()["buckets"]["stand_ins"]

    with torchtpu.eager_mode("fused"):
        torchtpu._C._set_buckets([0])
        for n in (100, 90):  # the bucket of 128: [3, 128, 25] float32 out, 38400 bytes
            check(n)
        torchtpu.synchronize()
        before = stand_ins()
        torchtpu._C._set_memory_capacity(torchtpu._C._memory_held(0) + 60_000)  # free: 60 KB, under twice 38400 bytes
        try:
            check(24)
        finally:
            torchtpu._C._set_memory_capacity(-1)
        assert stand_ins() == before
        check(26)  # the bucket of 32 serves it
        assert stand_ins() == before


def test_padded_copies_are_counted_in_memory_stats():
    torch.manual_seed(0)
    key = "bucket_padding_bytes.all.current"
    with torchtpu.eager_mode("fused"):
        for n in (20, 24):
            (torch.randn(3, n, 4).to("tpu").exp() * 2).cpu()
        torchtpu.synchronize()
        before = torch.tpu.memory_stats()[key]
        y = torch.randn(3, 28, 4).to("tpu").exp() * 2  # bucket 32: kept padded beside y
        torchtpu.synchronize()
        held = torch.tpu.memory_stats()[key] - before
        assert held >= 3 * 32 * 4 * 4, held
        assert torch.tpu.memory_stats()["bucket_padding_bytes.all.peak"] >= before + held
        torch.testing.assert_close(y.cpu().shape, torch.Size([3, 28, 4]))
        del y
        torchtpu.synchronize()
        assert torch.tpu.memory_stats()[key] == before


def decode_step(mask, cache, q):
    """One query over a static cache of n + 8 rows, under a mask of the n + t tokens so far."""
    keep = torch.cat([mask, torch.zeros(cache.shape[0] - mask.shape[0], device=mask.device)])
    w = (cache @ q).masked_fill(keep == 0, float("-inf")).softmax(0)
    return torch.nn.functional.gelu(w @ cache) + mask.sum()  # exact GELU: a graph with a NaN constant


@pytest.mark.parametrize("mode,positions", [("strict", 4), ("fused", 4), ("fused", 20)])
def test_a_decode_loop_over_prompts_compiles_per_bucket_not_per_prompt(mode, positions):
    """Two sizes vary independently (the prompt's length n: a static cache of n + positions + 4
    rows; the position t: the mask's n + t): once earlier prompts were decoded, a new prompt in
    the same buckets compiles nothing."""
    torch.manual_seed(0)
    counted = []  # compilations after each group of prompts

    def prompts():
        yield from (80, 81, 83, 86)  # every size within 81..113: the bucket of 128
        counted.append(_compiled("decode_step")[0])
        yield from (82, 84, 85, 87, 89)
        counted.append(_compiled("decode_step")[0])

    with torchtpu.eager_mode(mode):
        torchtpu._C._set_buckets([0])  # no remembered sizes
        torchtpu.debug.reset_metrics()
        for n in prompts():  # one line: Strict's places in the op stream include the caller's
            cache, q = torch.randn(n + positions + 4, 6), torch.randn(6)
            cache_d, q_d = cache.to("tpu"), q.to("tpu")
            for t in range(1, positions + 1):
                mask = torch.ones(n + t)
                got = decode_step(mask.to("tpu"), cache_d, q_d).cpu()
                torch.testing.assert_close(got, decode_step(mask, cache, q), rtol=1e-5, atol=1e-5)
    assert counted[0] > 0
    assert counted[1] == counted[0], counted

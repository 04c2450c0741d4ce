"""Bucketed programs in Fused and Strict Eager: a program (Strict: one op at
the same place in the op stream) whose sizes vary between runs of the same
ops compiles once per bucket, not once per size, and gives the exact
program's results. The suite fills padding with NaN (conftest), so a padded
element that reached a real one would show."""
import pytest
import torch

import torchtpu
from torchtpu import _C


def _big_compilations():
    c = torchtpu.debug.metrics()["compilations_by_cause"]
    return c["new_program"] + c["new_shape"] + c["new_attributes"] + c["new_bucket"]


def two_phases(first, then, counted):
    """Yields the sizes of `first`, then of `then`, appending the compilations so far to
    `counted` after each: iterated from one line (Strict's places include the caller's line)."""
    yield from first
    counted.append(_big_compilations())
    yield from then
    counted.append(_big_compilations())


def attention_like(x, w):
    """Reductions, softmax, a contraction and a mean over the varying dim."""
    h = torch.tanh(x @ w)                       # [b, n, d]
    scores = h @ h.transpose(1, 2) / 8          # [b, n, n]
    causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    p = scores.softmax(-1)
    y = p @ h                                   # contraction over n
    return y.mean(), y.amax(1), y.sum(1), h.var(1), y[:, 1:].sum()


@pytest.mark.parametrize("mode", ["fused", "strict"])
@pytest.mark.parametrize("lengths", [[20, 24, 31, 32, 17, 33, 40, 63, 64, 48]])
def test_varying_length_compiles_per_bucket(lengths, mode):
    torch.manual_seed(0)
    w = torch.randn(12, 12)
    wd = w.to("tpu")
    with torchtpu.eager_mode(mode):
        torchtpu.debug.reset_metrics()
        compiled_at = {}
        for n in lengths:
            x = torch.randn(3, n, 12)
            before = _big_compilations()
            got = attention_like(x.to("tpu"), wd)
            want = attention_like(x, w)
            for g, r in zip(got, want):
                torch.testing.assert_close(g.cpu(), r, rtol=1e-5, atol=1e-5)
            compiled_at[n] = _big_compilations() - before
        stats = torchtpu.debug.metrics()["buckets"]

    # 17..32 share the bucket of 32 once it is compiled; 33..64 that of 64.
    assert all(compiled_at[n] == 0 for n in (31, 32, 48, 64)), compiled_at
    if mode == "fused":
        assert compiled_at[17] == 0, compiled_at
    else:
        # Per op: the first size exactly, then a program per bucket. An op that sees only the
        # flattened [3n, 12] batch measures 3n, whose buckets have other edges (17: 51 <= 64).
        assert sum(compiled_at.values()) <= 3 * compiled_at[20] + 8, compiled_at
    assert stats["padded_elements"] >= stats["exact_elements"] > 0


@pytest.mark.parametrize("mode", ["fused", "strict"])
def test_a_size_whose_exact_program_is_cached_still_counts_as_seen(mode):
    """A size already compiled (here by another line; as well by an earlier
    run through the disk cache) runs its exact program and is remembered as
    seen, so the next size compiles its bucket's program at once and the
    sizes after it compile nothing: compilations do not depend on what the
    cache held."""
    torch.manual_seed(0)
    w = torch.randn(13, 13)  # a width no other test uses: programs of its own
    wd = w.to("tpu")
    with torchtpu.eager_mode(mode):
        _C._set_buckets([0])  # no remembered sizes
        # Another line (Strict: other places) compiles the programs of size 20.
        [t.cpu() for t in attention_like(torch.randn(3, 20, 13).to("tpu"), wd)]
        compiled_at = {}
        for n in (20, 24, 31, 32):
            x = torch.randn(3, n, 13)
            before = _big_compilations()
            got = attention_like(x.to("tpu"), wd)
            for g, r in zip(got, attention_like(x, w)):
                torch.testing.assert_close(g.cpu(), r, rtol=1e-5, atol=1e-5)
            compiled_at[n] = _big_compilations() - before
    assert compiled_at[20] == 0 and compiled_at[24] > 0, compiled_at
    assert compiled_at[31] == 0 and compiled_at[32] == 0, compiled_at


def test_bucketing_off_compiles_per_size():
    x = [torch.randn(2, n, 5) for n in (21, 22, 23)]
    with torchtpu.eager_mode("fused"):
        _C._set_buckets([])
        try:
            torchtpu.debug.reset_metrics()
            for t in x:
                torch.testing.assert_close((t.to("tpu").softmax(1) * 3).sum(1).cpu(), (t.softmax(1) * 3).sum(1))
            assert _big_compilations() == 3
            assert torchtpu.debug.metrics()["buckets"]["programs"] == 0
        finally:
            _C._set_buckets([0])


def test_an_op_without_a_rule_runs_at_exact_sizes():
    """A sort along the varying dim has no padding rule: the program compiles at its exact sizes
    (refused, counted) and its results stay the CPU's."""
    with torchtpu.eager_mode("fused"):
        torchtpu.debug.reset_metrics()
        for n in (9, 10, 11, 12):
            x = torch.randn(4, n)
            torch.testing.assert_close(torch.sort(x.to("tpu") * 2, dim=1).values.cpu(), torch.sort(x * 2, dim=1).values)
        stats = torchtpu.debug.metrics()["buckets"]
    assert stats["programs"] == 0 and stats["refused"] >= 1, stats
    assert stats["last_refusal"], stats


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_dtypes_and_special_values(dtype):
    """Every dtype, NaN and Inf in the real region, size-1 and empty dims run exactly."""
    with torchtpu.eager_mode("fused"):
        for n in (5, 6, 7, 1, 0, 8):
            if dtype.is_floating_point:
                x = torch.randn(2, n, 3).to(dtype)
                if n > 2:
                    x[0, 1, 0], x[1, 2, 1] = float("nan"), float("inf")
            elif dtype == torch.bool:
                x = torch.rand(2, n, 3) > 0.5
            else:
                x = torch.randint(-(2 ** 40), 2 ** 40, (2, n, 3))
            xd = x.to("tpu")
            if dtype == torch.bool:
                got, want = (xd.any(1), xd.all(1), xd.sum(1)), (x.any(1), x.all(1), x.sum(1))
            elif n == 0:  # amax over an empty dim raises, as on the CPU
                with pytest.raises(IndexError, match="non-zero size"):
                    xd.amax(1)
                got, want = (xd.sum(1), (xd * 2).cumsum(1)), (x.sum(1), (x * 2).cumsum(1))
            else:
                got, want = (xd.sum(1), xd.amax(1), (xd * 2).cumsum(1)), (x.sum(1), x.amax(1), (x * 2).cumsum(1))
            for g, r in zip(got, want):
                torch.testing.assert_close(g.cpu(), r, equal_nan=True)


@pytest.mark.parametrize("mode", ["fused", "strict"])
def test_training_with_a_padding_collator_matches_the_cpu(mode):
    """A small decoder trained on batches whose length varies (multiples of 8): the
    losses are the CPU's, and compilations stop once each bucket was seen."""
    torch.manual_seed(0)
    vocab, width = 50, 16

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, width)
            self.pos = torch.nn.Embedding(64, width)
            self.layer = torch.nn.TransformerEncoderLayer(width, 2, 32, dropout=0.0, batch_first=True)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, ids):
            n = ids.shape[1]
            h = self.emb(ids) + self.pos(torch.arange(n, device=ids.device))
            mask = torch.nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
            return self.head(self.layer(h, src_mask=mask, is_causal=True))

    cpu = Decoder()
    dev = Decoder()
    dev.load_state_dict(cpu.state_dict())
    dev.to("tpu")
    # SGD: the key bias's gradient is rounding noise (exactly zero in theory), which Adam would
    # blow up to full-size steps on both sides.
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    lengths = [8, 16, 24, 32, 16, 40, 56, 64, 8, 24, 48, 32]
    new = []
    with torchtpu.eager_mode(mode):
        torchtpu.debug.reset_metrics()
        for n in lengths:
            ids = torch.randint(0, vocab, (2, n), generator=g)
            before = _big_compilations()
            losses = []
            for model, opt, x in ((cpu, opt_c, ids), (dev, opt_d, ids.to("tpu"))):
                logits = model(x[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses.append(loss.item())
            torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=1e-5, atol=1e-6)
            new.append(_big_compilations() - before)
        stats = torchtpu.debug.metrics()["buckets"]
    # Every bucket (16, 32, 64 for inputs of n - 1) was seen before the last four steps.
    if mode == "fused":
        assert new[-4:] == [0, 0, 0, 0] and sum(new) <= 8, (new, stats["last_refusal"], stats)
    else:
        # Per op: its first size exactly, then one program per bucket; the few ops whose
        # padded layout no rule covers (refused, counted) compile at each new size.
        assert sum(new) <= 4 * new[0] + 8, (new, stats)
        assert all(c <= new[0] // 10 for c in new[-4:]) and stats["refused"] > 0, (new, stats)
    for p, q in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)



def test_writes_into_a_fixed_cache_drop_padded_rows():
    """A static cache written at the first n positions (index_copy_, a scatter that replaces): the
    padded rows of the update must not land anywhere, so the rest of the cache keeps its values."""
    torch.manual_seed(0)
    base = torch.randn(2, 40, 8)
    with torchtpu.eager_mode("fused"):
        torchtpu.debug.reset_metrics()
        cache = base.clone().to("tpu")
        ref = base.clone()
        for n in (9, 10, 12, 13, 11):
            k = torch.randn(2, n, 8)
            pos = torch.arange(3, 3 + n)
            cache.index_copy_(1, pos.to("tpu"), k.to("tpu"))
            ref.index_copy_(1, pos, k)
            torch.testing.assert_close((cache * 2).cpu(), ref * 2)
        stats = torchtpu.debug.metrics()["buckets"]



def test_a_growing_sequence_and_its_last_position():
    """A sequence that grows by one each step (torch.cat along the varying dim, as generate() does)
    read at its last position (a slice from a start that moves with the size)."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 4)
    with torchtpu.eager_mode("fused"):
        torchtpu.debug.reset_metrics()
        xd = x.to("tpu")
        for _ in range(8):
            new = torch.randn(2, 1, 4)
            x, xd = torch.cat([x, new], 1), torch.cat([xd, new.to("tpu")], 1)
            torch.testing.assert_close((xd[:, -1] * 2 + xd.sum(1)).cpu(), x[:, -1] * 2 + x.sum(1))
            torch.testing.assert_close(xd.cpu(), x)
        stats = torchtpu.debug.metrics()["buckets"]
    assert stats["programs"] > 0, stats["last_refusal"]


@pytest.mark.parametrize("mode", ["fused", "strict"])
def test_linalg_results_of_varying_shapes_match_the_cpu(mode):
    # LAPACK-layout results of several shapes made row-major at the same
    # lines: the flat storage of an [n, n + 1, 4] result grows as n*(n + 1),
    # which two observations fit as a line; its bucket was once misread.
    gen = torch.Generator().manual_seed(0)

    def spd():
        a = torch.randn(2, 4, 4, generator=gen)
        return a @ a.mT + 4 * torch.eye(4)

    def tri(n):
        return torch.randn(n, 4, 4, generator=gen).triu() + 3 * torch.eye(4)

    def same(fn, *args):
        want = fn(*args)
        got = fn(*[a.to("tpu") for a in args])
        for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
            torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)

    with torchtpu.eager_mode(mode):
        b = torch.randn(2, 4, 3, generator=gen)
        same(lambda a: torch.linalg.lu_factor(a), spd())
        same(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), spd(), b)
        a, r = tri(3), torch.randn(1, 4, 2, generator=gen)
        for transpose in (False, True):
            same(lambda r, a: torch.triangular_solve(r, a, upper=True, transpose=transpose), r, a)
        for n, k in [(2, 4), (2, 3), (3, 4), (5, 6), (2, 3)]:
            same(lambda a, r: torch.linalg.solve_triangular(a, r, upper=True), tri(n), torch.randn(n, 4, k, generator=gen))
        lu, piv = torch.linalg.lu_factor(spd())
        same(lambda lu, piv, b: torch.linalg.lu_solve(lu, piv, b), lu, piv, torch.randn(2, 4, 3, generator=gen))


@pytest.mark.parametrize("mode", ["fused", "strict"])
def test_writes_through_strided_views_of_varying_matrices_match_the_cpu(mode):
    # A diagonal of an [n, n] matrix is the flat storage at i*(n + 1); with the
    # storage laid out [n, n] and padded, those indices name other places
    # (diagflat, diag_embed and corrcoef's backward once wrote the wrong ones).
    gen = torch.Generator().manual_seed(0)
    with torchtpu.eager_mode(mode):
        for n in (2, 4, 3, 5, 7, 16, 17, 9):
            x = torch.randn(n, generator=gen)
            m = torch.randn(n, n, generator=gen)

            def run(dev):
                r = torch.zeros(n, n, device=dev)
                r.diagonal().copy_(x.to(dev))
                s = m.to(dev).clone()
                s.diagonal(1).add_(1)
                s[:, ::2] = 3
                return torch.cat([r.flatten(), s.flatten(), torch.diagflat(x.to(dev)).flatten(),
                                  torch.diag_embed(m.to(dev)).flatten()])
            torch.testing.assert_close(run("tpu").cpu(), run("cpu"), rtol=0, atol=0)


def last_logits(x, w_in, w_out):
    h = torch.tanh(x @ w_in)  # [1, n, 8]: a bucketed output, padded beside its exact value
    return h[:, -1:, :] @ w_out  # the last row, at a start that moves with n, as a language model's head reads it


def test_a_strict_op_reads_the_last_row_of_a_padded_value():
    """A Strict op reading one row at a start that moves with the size (a flat storage sliced at
    (n - 1) * width) runs as its bucket's program: a new prompt length in a seen bucket compiles
    nothing, and the rows past n (NaN padding) are never read."""
    torch.manual_seed(0)
    w_in, w_out = torch.randn(6, 8), torch.randn(8, 5)
    w_in_d, w_out_d = w_in.to("tpu"), w_out.to("tpu")
    counted = []
    with torchtpu.eager_mode("strict"):
        torchtpu.debug.reset_metrics()
        for n in two_phases((20, 21, 23, 26), (22, 25, 27, 29, 31), counted):  # one line: Strict's places in the op stream include the caller's
            x = torch.randn(1, n, 6)
            torch.testing.assert_close(last_logits(x.to("tpu"), w_in_d, w_out_d).cpu(), last_logits(x, w_in, w_out),
                                       rtol=1e-5, atol=1e-5)
        stats = torchtpu.debug.metrics()["buckets"]
    assert stats["refused"] == 0, stats["last_refusal"]
    assert counted[1] == counted[0], counted


def rms_scale(x):
    """An RMSNorm over [1, n] rows whose sizes are n itself."""
    return torch.rsqrt(x.pow(2) + 1e-6) * x


@pytest.mark.parametrize("mode", ["fused", "strict"])
def test_a_size_of_one_before_any_bucket_runs_as_it_is_and_keeps_the_plan(mode):
    """A decode step (n = 1) reaching a prefill's place before any of its buckets compiled
    does not build a bucket's program at size 1 (a size 1 broadcasts) and does not stop the
    plan: later prefills bucket, and after 9 and 17 compiled the buckets of 16 and 32, lengths
    in them compile nothing."""
    counted = []
    with torchtpu.eager_mode(mode):
        torchtpu.debug.reset_metrics()
        for n in two_phases((5, 1, 9, 17), (12, 1, 25, 30, 1), counted):  # one line: Strict's places in the op stream include the caller's
            x = torch.randn(1, n)
            torch.testing.assert_close(rms_scale(x.to("tpu")).cpu(), rms_scale(x), rtol=1e-6, atol=1e-6)
        stats = torchtpu.debug.metrics()["buckets"]
    assert counted[1] == counted[0], counted
    assert stats["programs"] > 0

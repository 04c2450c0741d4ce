"""FlexAttention on tpu (torchtpu/flex_attention.py), in every eager mode
and under torch.compile(backend="tpu"): outputs and logsumexp against the
CPU's flex_attention, and outputs, logsumexp and gradients against a plain
dense attention on the CPU (the CPU's flex_attention has no backward):
causal, sliding-window and document masks, relative-position, ALiBi and
tanh soft-capping score_mods, a learnable bias, GQA, query and key/value of
different lengths, rows with nothing to attend to, float32 and bfloat16,
autocast; create_block_mask on tpu; the cases refused; other devices
checked as before."""
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import torchtpu
from torchtpu import debug

pytestmark = [pytest.mark.usefixtures("each_mode"),
              pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile"),
              pytest.mark.filterwarnings("ignore:return_lse is deprecated")]

B, H, D = 2, 2, 16


def causal(b, h, q, k):
    return q >= k


def sliding_window(b, h, q, k):
    return (q >= k) & (q - k <= 8)


def strictly_past(b, h, q, k):  # row 0 attends to nothing
    return q > k


def relative_position(score, b, h, q, k):
    return score + (q - k).to(score.dtype) * 0.1


def alibi(score, b, h, q, k):
    return score - (h + 1).to(score.dtype) * 0.25 * (q - k).abs().to(score.dtype)


def soft_cap(score, b, h, q, k):
    return 5.0 * torch.tanh(score / 5.0)


def dense_reference(q, k, v, score_mod=None, mask_mod=None, gqa=False):
    """Attention written out on dense tensors (CPU, float32 scores): the
    mods get index tensors that broadcast over (batch, head, q, kv)."""
    if gqa:
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    nb, nh, lq, lk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    scores = (q.float() @ k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5
    idx = (torch.arange(nb).view(-1, 1, 1, 1), torch.arange(nh).view(1, -1, 1, 1),
           torch.arange(lq).view(1, 1, -1, 1), torch.arange(lk).view(1, 1, 1, -1))
    if score_mod is not None:
        scores = score_mod(scores, *idx)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(*idx).expand_as(scores), float("-inf"))
    lse = scores.logsumexp(-1)
    probs = torch.softmax(scores, -1).nan_to_num(0.0)
    return probs.to(q.dtype) @ v, lse


def close(got, want, tol):
    torch.testing.assert_close(got.detach().cpu().float(), want.detach().cpu().float(), rtol=tol, atol=tol)


def inputs(lq, lk, hq=H, hkv=H, dtype=torch.float32):
    torch.manual_seed(0)
    return (torch.randn(B, hq, lq, D, dtype=dtype), torch.randn(B, hkv, lk, D, dtype=dtype),
            torch.randn(B, hkv, lk, D, dtype=dtype))


def block_masks(mask_mod, lq, lk, **kwargs):
    """The same mask made on the CPU and on tpu."""
    if mask_mod is None:
        return None, None
    return (create_block_mask(mask_mod, B, None, lq, lk, device="cpu", **kwargs),
            create_block_mask(mask_mod, B, None, lq, lk, device="tpu", **kwargs))


def check(q, k, v, score_mod=None, mask_mod=None, gqa=False, tol=1e-5, grad_tol=1e-4, tpu_mask_mod=None):
    """flex_attention on tpu against the CPU's (forward) and the dense
    reference (forward and gradients of a loss using output and lse)."""
    lq, lk = q.shape[2], k.shape[2]
    if tpu_mask_mod is None:
        cpu_mask, tpu_mask = block_masks(mask_mod, lq, lk)
    else:
        cpu_mask = create_block_mask(mask_mod, B, None, lq, lk, device="cpu")
        tpu_mask = create_block_mask(tpu_mask_mod, B, None, lq, lk, device="tpu")
    with torch.no_grad():
        want_out, want_lse = flex_attention(q, k, v, score_mod=score_mod, block_mask=cpu_mask, enable_gqa=gqa,
                                            return_aux=AuxRequest(lse=True))
        want_lse = want_lse.lse
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    ref_out, ref_lse = dense_reference(*refs, score_mod, mask_mod, gqa)
    grad_out = torch.randn_like(ref_out)
    weights = torch.randn_like(ref_lse)
    (ref_out.float() * grad_out.float()).sum().add((ref_lse.nan_to_num(0, 0, 0) * weights).sum()).backward()

    ours = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    out, aux = flex_attention(*ours, score_mod=score_mod, block_mask=tpu_mask, enable_gqa=gqa,
                              return_aux=AuxRequest(lse=True))
    assert out.device.type == "tpu" and out.dtype == q.dtype and aux.lse.dtype == torch.float32
    loss = (out.float() * grad_out.to("tpu").float()).sum()
    loss.add((aux.lse.nan_to_num(0, 0, 0) * weights.to("tpu")).sum()).backward()
    close(out, want_out, tol)
    close(aux.lse, want_lse, 1e-5)
    close(out, ref_out, tol)
    close(aux.lse, ref_lse, 1e-5)
    for got, want in zip(ours, refs):
        close(got.grad, want.grad, grad_tol)


@pytest.mark.parametrize("score_mod,mask_mod", [
    (None, None), (relative_position, causal), (soft_cap, sliding_window), (alibi, causal),
    (None, strictly_past)], ids=["full", "causal-relpos", "window-softcap", "causal-alibi", "empty-rows"])
def test_masks_and_score_mods(score_mod, mask_mod):
    debug.reset_metrics()
    check(*inputs(32, 32), score_mod, mask_mod)
    torchtpu.synchronize()
    assert debug.metrics()["cpu_fallbacks"] == {}


def test_gqa_and_other_lengths():
    check(*inputs(16, 48, hq=4, hkv=2), relative_position, None, gqa=True)
    check(*inputs(48, 16, hq=4, hkv=2), alibi, None, gqa=True)


def test_bfloat16():
    check(*inputs(32, 32, dtype=torch.bfloat16), soft_cap, causal, tol=2e-2, grad_tol=5e-2)


def test_document_mask():
    docs = torch.tensor([0] * 10 + [1] * 14 + [2] * 8)
    on_tpu = docs.to("tpu")

    def cpu_docs(b, h, q, k):
        return (docs[q] == docs[k]) & (q >= k)

    def tpu_docs(b, h, q, k):
        return (on_tpu[q] == on_tpu[k]) & (q >= k)

    check(*inputs(32, 32), None, cpu_docs, tpu_mask_mod=tpu_docs)


def test_return_lse_and_scale():
    q, k, v = inputs(32, 32)
    cpu_mask, tpu_mask = block_masks(causal, 32, 32)
    with torch.no_grad():
        want, want_lse = flex_attention(q, k, v, block_mask=cpu_mask, scale=0.5, return_lse=True)
    out, lse = flex_attention(*(t.to("tpu") for t in (q, k, v)), block_mask=tpu_mask, scale=0.5, return_lse=True)
    close(out, want, 1e-5)
    close(lse, want_lse, 1e-5)


def test_learnable_bias_gradient():
    q, k, v = inputs(32, 32)
    torch.manual_seed(1)
    table = torch.randn(H, 63, requires_grad=True)
    ours = table.detach().to("tpu").requires_grad_()

    def with_table(t):
        return lambda score, b, h, qi, ki: score + t[h, qi - ki + 31]

    out_ref, _ = dense_reference(q, k, v, with_table(table), causal)
    out_ref.square().sum().backward()
    _, tpu_mask = block_masks(causal, 32, 32)
    out = flex_attention(*(t.to("tpu") for t in (q, k, v)), score_mod=with_table(ours), block_mask=tpu_mask)
    out.square().sum().backward()
    close(out, out_ref, 1e-5)
    close(ours.grad, table.grad, 1e-4)


def test_create_block_mask_on_tpu():
    for mask_mod in (causal, sliding_window):
        cpu_mask, tpu_mask = block_masks(mask_mod, 64, 64, BLOCK_SIZE=16)
        assert tpu_mask.kv_num_blocks.device.type == "tpu"
        assert torch.equal(tpu_mask.to_dense().cpu(), cpu_mask.to_dense())
        for got, want in zip(tpu_mask.as_tuple()[:-1], cpu_mask.as_tuple()[:-1]):
            if isinstance(want, torch.Tensor):
                assert torch.equal(got.cpu(), want)
            else:
                assert got == want
    q, k, v = inputs(64, 64)
    with torch.no_grad():
        want = flex_attention(q, k, v, score_mod=soft_cap, block_mask=cpu_mask)
    close(flex_attention(*(t.to("tpu") for t in (q, k, v)), score_mod=soft_cap, block_mask=tpu_mask), want, 1e-5)


def test_autocast():
    q, k, v = inputs(32, 32)
    with torch.no_grad():
        want = flex_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), score_mod=soft_cap)
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    dense_reference(*(t.bfloat16() for t in refs), soft_cap)[0].float().sum().backward()
    ours = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = flex_attention(*ours, score_mod=soft_cap)
    assert out.dtype == torch.bfloat16
    close(out, want, 2e-2)
    out.float().sum().backward()
    for got, ref in zip(ours, refs):
        assert got.grad.dtype == torch.float32
        close(got.grad, ref.grad, 5e-2)


def test_flash_backend_is_refused():
    q, k, v = (t.to("tpu") for t in inputs(16, 16))
    with pytest.raises(NotImplementedError, match="BACKEND='FLASH'"):
        flex_attention(q, k, v, kernel_options={"BACKEND": "FLASH"})


def test_other_devices_are_checked_as_before():
    q, k, v = (t.requires_grad_() for t in inputs(16, 16))
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q, k, v)
    q, k, v = (t.to("meta") for t in inputs(16, 16))
    with pytest.raises(ValueError, match="only supported on CUDA, CPU, HPU, or MPS"):
        flex_attention(q, k, v)


# torch.compile(backend="tpu")


class Attention(torch.nn.Module):
    """Projections around an attention function: flex_attention with a
    learnable relative-position table (a parameter and an intermediate of
    it captured by the score_mod), or the dense reference."""

    def __init__(self, dense=False):
        super().__init__()
        self.dense = dense
        self.qkv = torch.nn.Linear(32, 3 * 32)
        self.table = torch.nn.Parameter(torch.randn(H, 127) * 0.1)
        self.slope = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, x, block_mask=None):
        nb, length, _ = x.shape
        q, k, v = self.qkv(x).view(nb, length, 3, H, D).permute(2, 0, 3, 1, 4)
        table = self.table * self.slope

        def score_mod(score, b, h, qi, ki):
            return soft_cap(score + table[h, qi - ki + 63], b, h, qi, ki)

        if self.dense:
            out, lse = dense_reference(q, k, v, score_mod, causal)
        else:
            out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                      return_aux=AuxRequest(lse=True))
            lse = aux.lse
        return out.transpose(1, 2).reshape(nb, length, H * D), lse


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    debug.reset_metrics()
    yield
    torch._dynamo.reset()


@pytest.mark.usefixtures("fresh_dynamo")
def test_compiled_module_matches_dense_reference():
    torch.manual_seed(0)
    ref = Attention(dense=True)
    model = Attention().to("tpu")
    model.load_state_dict({name: t.to("tpu") for name, t in ref.state_dict().items()})
    compiled = torch.compile(model, backend="tpu")
    block_mask = create_block_mask(causal, None, None, 32, 32, device="tpu")
    for step in range(2):
        x = torch.randn(B, 32, 32)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no graph runs eagerly
            out, lse = compiled(x.to("tpu"), block_mask)
            (out.square().sum() + lse.sum()).backward()
        want, want_lse = ref(x)
        (want.square().sum() + want_lse.sum()).backward()
        close(out, want, 1e-4)
        close(lse, want_lse, 1e-4)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            assert p.grad is not None, name
            close(p.grad, q.grad, 1e-3)
    c = debug.metrics()["compiled"]
    assert c["programs"] == 2 and c["abandoned"] == 0 and c["runs"] == 4  # forward and backward
    assert debug.metrics()["cpu_fallbacks"] == {}


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.filterwarnings("ignore:torch.compile. Inductor cannot generate code")
def test_compiled_flex_attention_default_backend():
    """torch.compile(flex_attention) as TorchTitan writes it (Inductor, the
    default, is routed to the tpu backend): GQA, document mask, lse."""
    q, k, v = inputs(32, 32, hq=4, hkv=2)
    docs = torch.tensor([0] * 12 + [1] * 20)
    on_tpu = docs.to("tpu")
    cpu_mask = create_block_mask(lambda b, h, qi, ki: docs[qi] == docs[ki], None, None, 32, 32, device="cpu")
    tpu_mask = create_block_mask(lambda b, h, qi, ki: on_tpu[qi] == on_tpu[ki], None, None, 32, 32, device="tpu")
    with torch.no_grad():
        want, want_lse = flex_attention(q, k, v, score_mod=alibi, block_mask=cpu_mask, enable_gqa=True,
                                        return_lse=True)
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    ref_out, _ = dense_reference(*refs, alibi, lambda b, h, qi, ki: docs[qi] == docs[ki], gqa=True)
    ref_out.sum().backward()
    ours = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    out, lse = torch.compile(flex_attention)(*ours, score_mod=alibi, block_mask=tpu_mask, enable_gqa=True,
                                             return_lse=True)
    out.sum().backward()
    close(out, want, 1e-5)
    close(lse, want_lse, 1e-5)
    for got, ref in zip(ours, refs):
        close(got.grad, ref.grad, 1e-4)
    assert debug.metrics()["compiled"]["abandoned"] == 0


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.filterwarnings("ignore:torch.compile. Inductor cannot generate code")
def test_compiled_create_block_mask_default_backend():
    """torch.compile(create_block_mask) as TorchTitan writes it: a mask_mod that
    captures no tensor makes a graph with no tpu input, which still runs as a
    tpu program."""
    def sliding(b, h, qi, ki):
        return (qi >= ki) & (qi - ki < 24)

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*runs in the current eager mode")
        got = torch.compile(create_block_mask)(sliding, 2, 1, 64, 48, device="tpu", BLOCK_SIZE=16)
    want = create_block_mask(sliding, 2, 1, 64, 48, device="cpu", BLOCK_SIZE=16)
    assert torch.equal(got.to_dense().cpu(), want.to_dense())
    assert debug.metrics()["compiled"]["abandoned"] == 0 and debug.metrics()["compiled"]["programs"] >= 1

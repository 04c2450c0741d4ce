"""PyTorch's transformer inference fast path on the device against the CPU, in
every mode: nn.MultiheadAttention, nn.TransformerEncoderLayer and
nn.TransformerEncoder in eval mode under no_grad (the fused aten ops, and the
nested batch a key padding mask makes), and the ops they are made of; no
CPU fallback."""
import copy

import pytest
import torch

import torchtpu
from torchtpu import debug

pytestmark = pytest.mark.usefixtures("each_mode")

FAST_OPS = ("aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd")


def close(got, expected, dtype):
    tol = {torch.float32: 2e-5, torch.float64: 1e-10}[dtype]
    if expected is None:
        assert got is None
        return
    if expected.is_nested:
        expected, got = expected.to_padded_tensor(0.0), got.to_padded_tensor(0.0)
    torch.testing.assert_close(got.cpu(), expected, rtol=tol, atol=tol, equal_nan=True)


def run(module, *inputs, dtype=torch.float32, **kwargs):
    """The module's eval output on the CPU and on tpu; returns the tpu op
    counts (the fast path ran natively)."""
    torch.manual_seed(0)
    module = module.to(dtype).eval()
    inputs = [i.to(dtype) if isinstance(i, torch.Tensor) and i.is_floating_point() else i for i in inputs]
    with torch.no_grad():
        expected = module(*inputs, **kwargs)
        on_device = copy.deepcopy(module).to("tpu")
        debug.reset_metrics()
        moved = [i.to("tpu") if isinstance(i, torch.Tensor) else i for i in inputs]
        kw = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        got = on_device(*moved, **kw)
        torchtpu.synchronize()
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for g, e in zip(got, expected):
        close(g, e, dtype)
    m = debug.metrics()
    assert m["cpu_fallbacks"] == {}
    return m["ops"]


def fast(ops):
    return sum(ops.get(name, 0) for name in FAST_OPS)


X = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(1))
PAD = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] + [True] * 5])
CAUSAL = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["plain", "no_weights", "per_head", "padding", "attn_mask", "both"])
def test_multihead_attention_fast_path(case, dtype):
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    kwargs = {"no_weights": dict(need_weights=False), "per_head": dict(average_attn_weights=False),
              "padding": dict(key_padding_mask=PAD), "attn_mask": dict(attn_mask=CAUSAL),
              "both": dict(key_padding_mask=PAD, attn_mask=CAUSAL, need_weights=False)}.get(case, {})

    class SelfAttention(torch.nn.Module):  # query, key and value one tensor: the fast path's condition
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x, **kw):
            return self.mha(x, x, x, **kw)
    ops = run(SelfAttention(), X, dtype=dtype, **kwargs)
    assert fast(ops) == 1, ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask", [None, "src_mask", "padding"])
def test_encoder_layer_fast_path(mask, norm_first, activation, dtype):
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=norm_first,
                                             activation=activation)
    kwargs = {"src_mask": dict(src_mask=CAUSAL), "padding": dict(src_key_padding_mask=PAD)}.get(mask, {})
    ops = run(layer, X, dtype=dtype, **kwargs)
    assert fast(ops) == 1, ops


@pytest.mark.parametrize("nested", [True, False])
@pytest.mark.parametrize("final_norm", [False, True])
def test_encoder_with_key_padding(nested, final_norm):
    """With enable_nested_tensor PyTorch packs the batch into a nested tensor
    (the padded rows come out zero); without, each layer masks the keys."""
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested,
                                          norm=torch.nn.LayerNorm(16) if final_norm else None)
    ops = run(encoder, X, src_key_padding_mask=PAD)
    assert fast(ops) == 2, ops
    # nested: the batch packed once, and repacked after each layer
    assert ops.get("aten::_nested_tensor_from_mask", 0) == (3 if nested else 0)
    ops = run(encoder, X)  # no mask: dense layers
    assert fast(ops) == 2


def test_masked_softmax_mask_types():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 4)
    pad = torch.tensor([[False, False, True, True], [True, True, True, True]])  # row 2 fully masked: NaN
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    full = torch.rand(2, 3, 4, 4) > 0.6
    cases = [(pad, 3, 1), (causal, 3, 0), (full, 3, 2), (full, 2, 2), (full, None, None), (pad, 2, 1),
             (causal, 1, 0), (torch.rand(5, 7) > 0.5, 1, 0)]
    for mask, dim, kind in cases:
        inp = x if mask.dim() != 2 or mask.shape == (2, 4) or mask.shape == (4, 4) else torch.randn(5, 7)
        expected = torch._masked_softmax(inp, mask, dim, kind)
        got = torch._masked_softmax(inp.to("tpu"), mask.to("tpu"), dim, kind).cpu()
        torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-6, atol=1e-6)
    for bad in [(x, pad.t(), 3, 1), (x, causal[:3], 3, 0), (x, full[:1], 3, 2), (x, pad.int(), 3, 1)]:
        with pytest.raises(RuntimeError):
            torch._masked_softmax(bad[0], *bad[1:])
        with pytest.raises(RuntimeError):
            torch._masked_softmax(bad[0].to("tpu"), bad[1].to("tpu"), *bad[2:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transform_bias_rescale_qkv(dtype):
    torch.manual_seed(0)
    qkv, bias = torch.randn(2, 5, 3 * 12, dtype=dtype), torch.randn(3 * 12, dtype=dtype)
    expected = torch._transform_bias_rescale_qkv(qkv, bias, 3)
    got = torch._transform_bias_rescale_qkv(qkv.to("tpu"), bias.to("tpu"), 3)
    for g, e in zip(got, expected):
        assert g.shape == e.shape == (2, 3, 5, 4)
        torch.testing.assert_close(g.cpu(), e, rtol=1e-6, atol=1e-6)


def test_nested_tensor_from_mask_and_back():
    t = torch.randn(3, 5, 4)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False], [False] * 5])
    nt = torch._nested_tensor_from_mask(t.to("tpu"), mask.to("tpu"))
    assert nt.is_nested and nt.device.type == "tpu"
    expected = torch._nested_tensor_from_mask(t, mask)
    torch.testing.assert_close(nt.to_padded_tensor(0.0).cpu(), expected.to_padded_tensor(0.0))
    torch.testing.assert_close(nt.to_padded_tensor(-1.0, (3, 6, 4)).cpu(), expected.to_padded_tensor(-1.0, (3, 6, 4)))
    for m in (mask, torch.tensor([[True, False, True, False, False]] * 3)):
        assert torch._nested_tensor_from_mask_left_aligned(t.to("tpu"), m.to("tpu")) == \
            torch._nested_tensor_from_mask_left_aligned(t, m)
    with pytest.raises(RuntimeError, match="left-aligned"):
        torch._nested_tensor_from_mask(t.to("tpu"), torch.tensor([[False, True] + [True] * 3] * 3, device="tpu"))

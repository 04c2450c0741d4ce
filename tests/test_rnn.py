"""Recurrent layers (nn.LSTM, nn.GRU, LSTMCell, GRUCell) on the device against
the CPU, in every mode: outputs, final states and the gradients of inputs,
states and weights, with and without biases, multi-layer, bidirectional,
batch_first and 16-bit floats. The fused cell kernels must run natively (no
CPU fallback) and reject bad shapes with the CPU's kind of error."""
import copy

import pytest
import torch
import torch.nn as nn

import torchtpu

pytestmark = pytest.mark.usefixtures("each_mode")

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
       torch.float16: dict(rtol=3e-3, atol=3e-3)}


def _run(module, inputs, device):
    m = copy.deepcopy(module).to(device)
    ins = [t.detach().to(device).requires_grad_() for t in inputs]
    out = m(*ins)
    flat = []
    for o in out if isinstance(out, tuple) else (out,):
        flat.extend(o if isinstance(o, tuple) else (o,))
    cot = torch.Generator().manual_seed(3)
    loss = sum((o * torch.randn(o.shape, generator=cot).to(o)).sum() for o in flat)
    loss.backward()
    grads = [t.grad for t in ins] + [p.grad for p in m.parameters()]
    return [o.detach().cpu() for o in flat], [g.cpu() for g in grads]


def _check(module, inputs, dtype=torch.float32):
    torchtpu.debug.reset_metrics()
    module = module.to(dtype)
    inputs = [t.to(dtype) for t in inputs]
    ref_out, ref_grads = _run(module, inputs, "cpu")
    out, grads = _run(module, inputs, "tpu")
    for a, b in zip(out + grads, ref_out + ref_grads):
        torch.testing.assert_close(a, b, **TOL[dtype])
    m = torchtpu.debug.metrics()
    assert m["cpu_fallbacks"] == {}, m["cpu_fallbacks"]
    return m["ops"]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, True, True)])
def test_recurrent_layer(kind, bias, layers, bidirectional, batch_first):
    torch.manual_seed(0)
    rnn = getattr(nn, kind)(6, 5, num_layers=layers, bias=bias, bidirectional=bidirectional,
                            batch_first=batch_first)
    x = torch.randn(3, 4, 6)
    h0 = torch.randn(layers * (2 if bidirectional else 1), 3 if batch_first else 4, 5)
    state = (h0, torch.randn_like(h0)) if kind == "LSTM" else h0
    if kind == "LSTM":
        class WithState(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = rnn

            def forward(self, x, h, c):
                return self.rnn(x, (h, c))
        ops = _check(WithState(), [x, *state])
    else:
        ops = _check(rnn, [x, state])
    fused = "aten::_thnn_fused_lstm_cell" if kind == "LSTM" else "aten::_thnn_fused_gru_cell"
    assert ops.get(fused, 0) > 0, sorted(ops)


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_cell(kind, dtype):
    torch.manual_seed(1)
    cell = getattr(nn, kind)(7, 4)
    x, h = torch.randn(5, 7), torch.randn(5, 4)
    if kind == "LSTMCell":
        class WithState(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = cell

            def forward(self, x, h, c):
                return self.cell(x, (h, c))
        _check(WithState(), [x, h, torch.randn(5, 4)], dtype)
    else:
        _check(cell, [x, h], dtype)


def test_nonfinite_inputs_propagate_like_cpu():
    cell = nn.GRUCell(3, 2)
    x = torch.tensor([[float("nan"), 1.0, 0.0], [float("inf"), -float("inf"), 2.0]])
    h = torch.zeros(2, 2)
    ref = cell(x, h)
    got = copy.deepcopy(cell).to("tpu")(x.to("tpu"), h.to("tpu")).cpu()
    torch.testing.assert_close(got, ref, equal_nan=True)


def test_bad_shapes_raise():
    ig = torch.randn(2, 8, device="tpu")
    cx = torch.randn(3, 2, device="tpu")
    with pytest.raises(RuntimeError, match="_thnn_fused_lstm_cell"):
        torch.ops.aten._thnn_fused_lstm_cell(ig, ig, cx)
    with pytest.raises(RuntimeError, match="_thnn_fused_gru_cell"):
        torch.ops.aten._thnn_fused_gru_cell(ig, ig, torch.randn(2, 2, device="tpu").to(torch.float16))
    assert torch.ones(2, device="tpu").sum().item() == 2.0

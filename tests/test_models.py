"""Models train on the device as on the CPU: same seed, same losses (float32,
relative 1e-4), in Debug and Strict modes."""
import copy

import pytest
import torch

import torchtpu
from torchtpu.testing.models import MLP, CharData, TinyGPT


def _train(model, batches, device, steps, opt_cls, **opt_kw):
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), **opt_kw)
    losses = []
    for x, y, loss_fn in batches[:steps]:
        loss = loss_fn(model, x.to(device), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def _mlp_batches(n):
    g = torch.Generator().manual_seed(1)
    ce = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)
    return [(torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g), ce) for _ in range(n)]


def _gpt_batches(data, n):
    g = torch.Generator().manual_seed(2)
    out = []
    for _ in range(n):
        x, y = data.batch(4, 16, g)
        out.append((x, y, lambda m, a, b: m(a, b)))
    return out


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_mlp_matches_cpu(mode, opt):
    torch.manual_seed(0)
    model = MLP()
    batches = _mlp_batches(5)
    cls, kw = (torch.optim.SGD, dict(lr=0.1, momentum=0.9)) if opt == "sgd" else (torch.optim.AdamW, dict(lr=1e-2))
    cpu_losses, cpu_model = _train(model, batches, "cpu", 5, cls, **kw)
    with torchtpu.eager_mode(mode):
        tpu_losses, tpu_model = _train(model, batches, "tpu", 5, cls, **kw)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    for (name, p_cpu), p_tpu in zip(cpu_model.named_parameters(), tpu_model.parameters()):
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_decoder_matches_cpu(mode):
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=32, layers=2, heads=4, max_len=16)
    batches = _gpt_batches(data, 5)
    cpu_losses, _ = _train(model, batches, "cpu", 5, torch.optim.AdamW, lr=3e-3)
    torchtpu.debug.reset_metrics()
    with torchtpu.eager_mode(mode):
        tpu_losses, _ = _train(model, batches, "tpu", 5, torch.optim.AdamW, lr=3e-3)
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    assert cpu_losses[-1] < cpu_losses[0]
    assert torchtpu.debug.metrics()["cpu_fallbacks"] == {}


def test_training_step_compiles_once():
    """A repeated training step reuses its executables: step 3 compiles nothing."""
    torch.manual_seed(0)
    data = CharData()
    model = TinyGPT(data.vocab, width=32, layers=2, heads=4, max_len=16).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = _gpt_batches(data, 3)
    for i, (x, y, fn) in enumerate(batches):
        if i == 2:
            torchtpu.debug.reset_metrics()
        loss = fn(model, x.to("tpu"), y.to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    m = torchtpu.debug.metrics()
    assert m["compilations"] == 0, m["compilations"]
    assert m["executions"] > 100 and m["cache_hits"] == m["executions"]


class _TiedLM(torch.nn.Module):
    """Output projection tied to the input embedding, as in GPT-2, BERT and T5."""

    def __init__(self, vocab=11, width=8):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.mix = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(torch.tanh(self.mix(self.emb(x))))


@pytest.mark.parametrize("mode", ["debug", "strict", "fused"])
def test_tied_weights_stay_tied_and_train_as_on_cpu(mode):
    torch.manual_seed(0)
    model = _TiedLM()
    g = torch.Generator().manual_seed(3)
    ce = lambda m, x, y: torch.nn.functional.cross_entropy(m(x).flatten(0, 1), y.flatten())
    batches = [(torch.randint(0, 11, (4, 5), generator=g), torch.randint(0, 11, (4, 5), generator=g), ce)
               for _ in range(3)]
    cpu_losses, cpu_model = _train(model, batches, "cpu", 3, torch.optim.AdamW, lr=1e-2)
    with torchtpu.eager_mode(mode):
        tpu_losses, tpu_model = _train(model, batches, "tpu", 3, torch.optim.AdamW, lr=1e-2)
    assert tpu_model.head.weight is tpu_model.emb.weight
    assert len(list(tpu_model.parameters())) == len(list(cpu_model.parameters())) == 3
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(tpu_model.emb.weight.detach().cpu(), cpu_model.emb.weight.detach(),
                               rtol=1e-4, atol=1e-5)


def test_parameter_identity_data_and_grad_assignment_as_on_cuda():
    model = _TiedLM()
    params = {name: id(p) for name, p in model.named_parameters()}
    model.to("tpu")
    assert {name: id(p) for name, p in model.named_parameters()} == params  # moved in place, not replaced
    assert all(p.device.type == "tpu" for p in model.parameters())
    model(torch.tensor([[1, 2]], device="tpu")).sum().backward()
    grad = model.emb.weight.grad
    model.cpu()  # and back: same objects, gradients moved with them
    assert {name: id(p) for name, p in model.named_parameters()} == params
    assert model.emb.weight.grad.device.type == "cpu"
    torch.testing.assert_close(model.emb.weight.grad, grad.cpu())

    p = torch.nn.Parameter(torch.ones(3))
    p.data = torch.arange(3.0, device="tpu")  # .data may change device, as with CUDA
    assert isinstance(p, torch.nn.Parameter) and p.device.type == "tpu" and p.requires_grad
    assert p.tolist() == [0.0, 1.0, 2.0]
    p.grad = torch.full((3,), 2.0, device="tpu")
    assert p.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="device"):
        p.grad = torch.ones(3)  # a CPU gradient for a tpu parameter is refused, as on CUDA
    with pytest.raises(RuntimeError):
        p.grad = torch.ones(4, device="tpu")  # wrong shape

"""torch.compile(backend="tpu") against eager, in every eager mode: forward
and gradients of the test models, one program per graph (and per shape when
shapes are dynamic), calls that run programs without compiling, batch norm
running statistics, a compiled optimizer step, graph breaks, random ops that
draw new numbers per call, device-side index checks inside a compiled graph,
graphs that cannot be captured running eagerly, and the persistent cache in
a second process."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import debug
from torchtpu.testing import models

pytestmark = pytest.mark.usefixtures("each_mode")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    debug.reset_metrics()
    yield
    torch._dynamo.reset()


def compiled():
    return debug.metrics()["compiled"]


def close(got, want, tol=1e-5):
    torch.testing.assert_close(got.detach().cpu(), want.detach().cpu(), rtol=tol, atol=tol)


def test_backend_is_registered():
    assert "tpu" in torch._dynamo.list_backends()


def test_mlp_forward_backward_and_one_program_per_graph():
    torch.manual_seed(0)
    ref = models.MLP().to("tpu")
    model = models.MLP().to("tpu")
    model.load_state_dict(ref.state_dict())
    cm = torch.compile(model, backend="tpu")
    for step in range(3):
        x = torch.randn(8, 32).to("tpu")
        got = cm(x)
        want = ref(x)
        close(got, want)
        got.square().sum().backward()
        want.square().sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            close(p.grad, q.grad)
        if step == 1:  # the eager side's gradient accumulation compiled its graphs in step 1
            before = debug.metrics()["compilations"]
    c = compiled()
    assert c["programs"] == 2 and c["abandoned"] == 0  # forward and backward
    assert c["runs"] == 6
    assert debug.metrics()["compilations"] == before  # later calls compile nothing


def test_decoder_training_matches_eager():
    data = models.CharData()

    def run(compile_model):
        torch.manual_seed(0)
        model = models.TinyGPT(data.vocab, width=32, layers=2, heads=4, max_len=16).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        step_model = torch.compile(model, backend="tpu") if compile_model else model
        gen = torch.Generator().manual_seed(0)
        losses = []
        for _ in range(4):
            x, y = data.batch(4, 16, gen)
            loss = step_model(x.to("tpu"), y.to("tpu"))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return torch.tensor(losses)

    eager = run(False)
    got = run(True)
    torch.testing.assert_close(got, eager, rtol=1e-4, atol=1e-5)
    assert compiled()["abandoned"] == 0


def test_batch_norm_running_stats_and_eval():
    torch.manual_seed(0)
    ref = models.SmallCNN().to("tpu")
    model = models.SmallCNN().to("tpu")
    model.load_state_dict(ref.state_dict())
    cm = torch.compile(model, backend="tpu")
    gen = torch.Generator().manual_seed(1)
    for _ in range(2):
        x, _ = models.cnn_batch(4, gen)
        close(cm(x.to("tpu")), ref(x.to("tpu")), 1e-4)
    for name, buf in ref.named_buffers():
        close(dict(model.named_buffers())[name], buf, 1e-5)
    model.eval()
    ref.eval()
    x, _ = models.cnn_batch(4, gen)
    close(cm(x.to("tpu")), ref(x.to("tpu")), 1e-4)


def test_compiled_optimizer_step():
    torch.manual_seed(0)
    params = [torch.randn(5, 3).to("tpu").requires_grad_() for _ in range(2)]
    ref = [p.detach().clone().requires_grad_() for p in params]
    opt = torch.optim.AdamW(params, lr=0.1)
    ref_opt = torch.optim.AdamW(ref, lr=0.1)

    @torch.compile(backend="tpu")
    def step():
        opt.step()

    for _ in range(3):
        for p, q in zip(params, ref):
            g = torch.randn(5, 3).to("tpu")
            p.grad, q.grad = g.clone(), g.clone()
        step()
        ref_opt.step()
        for p, q in zip(params, ref):
            # Compiled, the step is capturable (step counts on the device, bias
            # corrections as device ops), as Dynamo makes it on CUDA.
            close(p, q, 1e-5)
    c = compiled()
    assert c["programs"] == 1 and c["runs"] == 3 and c["abandoned"] == 0  # one program per step


def test_graph_break_runs_the_pieces():
    def fn(x):
        y = torch.sin(x) * 2
        print("a graph break", end="\r")
        return torch.cos(y).sum(0)

    x = torch.randn(4, 3).to("tpu")
    close(torch.compile(fn, backend="tpu")(x), fn(x))
    assert compiled()["programs"] == 2


def test_dynamic_shapes_compile_per_shape():
    def fn(x):
        return (x * x).sum(-1) + 1

    cfn = torch.compile(fn, backend="tpu", dynamic=True)
    for n in (3, 5, 3, 7, 5):
        x = torch.randn(n, 4).to("tpu")
        close(cfn(x), fn(x))
    assert compiled()["programs"] == 3 and compiled()["runs"] == 5


def test_random_ops_draw_new_numbers_each_call():
    def fn(x):
        return F.dropout(x, 0.5, training=True)

    cfn = torch.compile(fn, backend="tpu")
    x = torch.ones(64, 64).to("tpu")
    a, b = cfn(x).cpu(), cfn(x).cpu()
    assert not torch.equal(a, b)
    for r in (a, b):  # kept values scaled by 2, about half dropped
        assert set(r.unique().tolist()) <= {0.0, 2.0} and 0.4 < (r == 0).float().mean() < 0.6
    torch.manual_seed(5)
    c = cfn(x).cpu()
    torch.manual_seed(5)
    torch.testing.assert_close(c, fn(x).cpu())  # the eager op draws the same keys


def test_index_error_inside_a_compiled_graph():
    emb = torch.nn.Embedding(10, 4).to("tpu")
    cfn = torch.compile(lambda i: emb(i).sum(), backend="tpu")
    close(cfn(torch.tensor([1, 2]).to("tpu")), emb(torch.tensor([1, 2]).to("tpu")).sum())
    with pytest.raises(IndexError, match=r"out of range.*issued at .*test_compile\.py:\d+ in <lambda>"):
        cfn(torch.tensor([3, 12]).to("tpu")).item()


def test_a_graph_that_cannot_be_captured_runs_eagerly():
    # An op with no lowering runs on the CPU fallback, a host round trip: the
    # capture stops and the graph runs in the eager mode, with a warning.
    def fn(a):
        return torch.linalg.eigvals(a @ a.mT + torch.eye(3, device=a.device)).real.sort().values * 2

    a = torch.randn(3, 3).to("tpu")
    with pytest.warns(UserWarning, match="runs in the current eager mode"):
        got = torch.compile(fn, backend="tpu")(a)
    close(got, fn(a))
    assert compiled()["abandoned"] == 1




def test_stablehlo_of_a_compiled_call():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).to("tpu")
    text = debug.stablehlo(model, torch.randn(2, 4).to("tpu"))
    assert text.startswith("// forward graph") and "@main(" in text  # parameters require grad
    with torch.no_grad():
        assert debug.stablehlo(model, torch.randn(2, 4).to("tpu")).startswith("// inference graph")
    assert "stablehlo.dot_general" in text and "stablehlo.maximum" in text


def test_export_runs_from_its_own_text():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    x = torch.randn(4, 6)
    ep = torch.export.export(model, (x,))
    exported = torchtpu.export.stablehlo(ep)
    assert "@main(" in exported.text
    assert set(exported.weights) >= {"0.weight", "0.bias", "2.weight", "2.bias"}
    # The plugin compiles the text itself and runs it on host tensors.
    (got,) = exported.run(x)
    torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)
    y = torch.randn(4, 6)
    torch.testing.assert_close(exported.run(y)[0], model(y), rtol=1e-5, atol=1e-5)


def test_default_backend_on_tpu_tensors_compiles_with_tpu():
    def fn(x):
        return torch.softmax(x, -1) * 3

    x = torch.randn(4, 5).to("tpu")
    got = torch.compile(fn)(x)  # Inductor has no tpu code generator
    close(got, fn(x))
    assert compiled()["programs"] == 1


def test_an_input_at_another_storage_offset_gets_its_own_program():
    # Dynamo guards sizes and strides, not where a view starts in its
    # storage: the program reads whole storages, so a view elsewhere in a
    # larger storage is captured again rather than read at the old place.
    def fn(x):
        return x * 2 + 1

    cfn = torch.compile(fn, backend="tpu")
    base = torch.arange(24.).reshape(6, 4).to("tpu")
    for rows in (slice(0, 3), slice(2, 5), slice(3, 6), slice(2, 5)):
        close(cfn(base[rows]), fn(base[rows]))
    close(cfn(torch.ones(3, 4).to("tpu")), torch.full((3, 4), 3.0))
    assert compiled()["programs"] == 4  # three offsets in the 6x4 storage, one 3x4 storage


def test_a_compiled_training_step_function():
    # Forward, backward and the optimizer step in one compiled function:
    # Dynamo breaks the graph at backward(); every piece runs on the device.
    data = models.CharData()

    def run(compile_step):
        torch.manual_seed(0)
        model = models.TinyGPT(data.vocab, width=32, layers=1, heads=4, max_len=16).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, capturable=True)

        def step(x, y):
            loss = model(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        fn = torch.compile(step, backend="tpu") if compile_step else step
        gen = torch.Generator().manual_seed(0)
        out = []
        for _ in range(3):
            x, y = data.batch(2, 16, gen)
            out.append(fn(x.to("tpu"), y.to("tpu")).item())
        return torch.tensor(out)

    torch.testing.assert_close(run(True), run(False), rtol=1e-4, atol=1e-5)
    assert compiled()["abandoned"] == 0 and compiled()["programs"] >= 3

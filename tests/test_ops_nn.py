"""Op correctness on the tpu device against CPU PyTorch: nn ops, shape ops,
indexing, in-place/out= forms, optimizer steps and fallback accounting.
Every test also asserts that no op fell back to the CPU."""
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu.testing.ops import DEV, check, r

pytestmark = pytest.mark.usefixtures("each_mode", "no_cpu_fallback")

# ---- nn ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, dim):
    x = r(3, 4, 5) * 4
    check(lambda x: getattr(F, op)(x, dim=dim), x)
    check(lambda x: getattr(torch, op)(x, dim, dtype=torch.float64), x, rtol=1e-6, atol=1e-6)


def test_softmax_extreme_and_low_precision():
    x = torch.tensor([[1000.0, 0.0, -1000.0], [-float("inf"), 1.0, 2.0]])
    check(lambda x: (F.softmax(x, 1), F.log_softmax(x, 1)), x, grad=False)
    check(lambda x: F.softmax(x, -1), r(4, 33, dtype=torch.bfloat16) * 3)
    check(lambda x: F.log_softmax(x, -1), r(4, 33, dtype=torch.float16) * 3, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("case", ["affine", "no_affine", "weight_only", "2d_shape", "bf16"])
def test_layer_norm(case):
    x = r(3, 5, 8) * 2 + 1
    if case == "affine":
        check(lambda x, w, b: F.layer_norm(x, (8,), w, b), x, r(8, seed=1), r(8, seed=2), rtol=1e-4, atol=1e-4)
    elif case == "no_affine":
        check(lambda x: F.layer_norm(x, (8,)), x, rtol=1e-4, atol=1e-4)
    elif case == "weight_only":
        check(lambda x, w: F.layer_norm(x, (8,), w, eps=1e-3), x, r(8, seed=1), rtol=1e-4, atol=1e-4)
    elif case == "2d_shape":
        check(lambda x, w, b: F.layer_norm(x, (5, 8), w, b), x, r(5, 8, seed=1), r(5, 8, seed=2), rtol=1e-4, atol=1e-4)
    else:
        check(lambda x, w, b: F.layer_norm(x, (8,), w, b), x.bfloat16(), r(8, seed=1).bfloat16(),
              r(8, seed=2).bfloat16(), rtol=3e-2, atol=5e-2)


def test_layer_norm_module():
    torch.manual_seed(0)
    m = torch.nn.LayerNorm(6)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    x = r(4, 6)
    check(lambda x, w, b: F.layer_norm(x, (6,), w, b, m.eps), x, m.weight, m.bias, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("padding_idx", [None, 0, 3, -1])
def test_embedding(padding_idx):
    idx = torch.tensor([[0, 3, 1, 3], [4, 0, 2, 3]])
    check(lambda w, i: F.embedding(i, w, padding_idx=padding_idx), r(5, 6), idx)


def test_embedding_module_padding_zero_grad():
    emb = torch.nn.Embedding(6, 4, padding_idx=2).to(DEV)
    out = emb(torch.tensor([2, 2, 1], device=DEV))
    out.sum().backward()
    g = emb.weight.grad.cpu()
    assert torch.equal(g[2], torch.zeros(4)) and torch.equal(g[1], torch.ones(4))
    assert torch.equal(out[0].detach().cpu(), torch.zeros(4))


@pytest.mark.parametrize("kw", [dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=2),
                                dict(ignore_index=-100), dict(weight=True), dict(weight=True, reduction="sum"),
                                dict(weight=True, ignore_index=1), dict(label_smoothing=0.1),
                                dict(label_smoothing=0.2, weight=True), dict(label_smoothing=0.1, ignore_index=2),
                                dict(label_smoothing=0.1, reduction="none")])
def test_cross_entropy(kw):
    logits = r(8, 5) * 2
    target = torch.tensor([0, 2, 4, 1, 2, 3, -100, 2])
    if kw.get("ignore_index", -100) != -100:
        target = torch.where(target == -100, torch.tensor(kw["ignore_index"]), target)
    w = r(5, lo=0.5, hi=2.0) if kw.pop("weight", False) else None
    kw = dict(kw)
    # class weights are not differentiable: pass them as a closure, not an input
    check(lambda x, t: F.cross_entropy(x, t, weight=None if w is None else w.to(x.device), **kw), logits, target,
          rtol=1e-5, atol=1e-5)


def test_cross_entropy_prob_target():
    logits, probs = r(6, 4) * 2, F.softmax(r(6, 4, seed=3), 1)
    check(lambda x, p: F.cross_entropy(x, p), logits, probs, rtol=1e-5, atol=1e-5)
    check(lambda x, p: F.cross_entropy(x, p, reduction="none", label_smoothing=0.1), logits, probs,
          rtol=1e-5, atol=1e-5)


def test_cross_entropy_3d_and_nll():
    logits = r(2, 5, 3) * 2
    target = torch.tensor([[0, 4, 1], [2, 2, 3]])
    check(lambda x, t: F.cross_entropy(x, t), logits, target, rtol=1e-5, atol=1e-5)
    check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="sum"), r(6, 4), torch.tensor([0, 1, 2, 3, 0, 1]),
          rtol=1e-5, atol=1e-5)


def test_cross_entropy_hand_computed():
    x = torch.tensor([[0.0, 0.0]], device=DEV)
    assert math.isclose(F.cross_entropy(x, torch.tensor([1], device=DEV)).item(), math.log(2), rel_tol=1e-6)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train(p):
    torch.manual_seed(0)
    x = (torch.rand(256, 256) + 0.5).to(DEV).requires_grad_()
    y = F.dropout(x, p=p, training=True)
    assert y.device.type == "tpu"
    yc, xc = y.detach().cpu(), x.detach().cpu()
    kept = yc != 0
    assert abs((~kept).float().mean().item() - p) < 0.01
    torch.testing.assert_close(yc[kept], xc[kept] / (1 - p))
    y.backward(torch.ones_like(y))
    g = x.grad.cpu()
    torch.testing.assert_close(g, kept.float() / (1 - p))
    torch.manual_seed(0)
    y2 = F.dropout(x.detach(), p=p, training=True).cpu()
    torch.testing.assert_close(y2, yc, rtol=0, atol=0)


def test_dropout_eval_and_edge():
    x = r(8, 9)
    check(lambda x: F.dropout(x, 0.5, training=False), x)
    m = torch.nn.Dropout(0.3).eval()
    check(m, x)
    check(lambda x: F.dropout(x, 0.0, training=True), x)
    check(lambda x: F.dropout(x, 1.0, training=True), x)


# ---- shape ops --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["cat0", "cat1", "cat_neg", "cat_mixed", "stack0", "stack_last", "cat_empty"])
def test_cat_stack(case):
    a, b, c = r(2, 3), r(2, 3, seed=1), r(4, 3, seed=2)
    if case == "cat0":
        check(lambda a, b, c: torch.cat([a, b, c]), a, b, c)
    elif case == "cat1":
        check(lambda a, b: torch.cat([a, b, a], 1), a, b)
    elif case == "cat_neg":
        check(lambda a, b: torch.cat((a.t(), b.t()), -1), a, b)
    elif case == "cat_mixed":
        check(lambda a, b: torch.cat([a, b]), a, r(2, 3, dtype=torch.int64), grad=False)
        check(lambda a, b: torch.cat([a, b]), a.bfloat16(), b, grad=False)
    elif case == "stack0":
        check(lambda a, b: torch.stack([a, b]), a, b)
    elif case == "stack_last":
        check(lambda a, b: torch.stack([a, b, a], dim=-1), a, b)
    else:
        check(lambda a, e: torch.cat([a, e]), a, torch.empty(0, 3))


@pytest.mark.parametrize("case", ["reshape", "view", "permute", "transpose", "t_contig", "flatten", "unsqueeze",
                                  "expand", "chain", "view_of_view", "narrow", "split", "chunk", "unbind", "squeeze"])
def test_views(case):
    x = r(2, 3, 4)
    f = {
        "reshape": lambda x: x.reshape(4, 6) * 2,
        "view": lambda x: x.view(6, 4) + 1,
        "permute": lambda x: x.permute(2, 0, 1) * 1,
        "transpose": lambda x: x.transpose(0, 2).contiguous(),
        "t_contig": lambda x: x.transpose(1, 2).contiguous().view(2, 12),
        "flatten": lambda x: x.flatten(1).exp(),
        "unsqueeze": lambda x: x.unsqueeze(1).unsqueeze(-1).sum(0),
        "expand": lambda x: x[:, :1].expand(2, 5, 4) * 3,
        "chain": lambda x: x.permute(1, 0, 2).reshape(3, 8)[:, 1::2].t(),
        "view_of_view": lambda x: x[1].view(12)[3:9].view(2, 3),
        "narrow": lambda x: x.narrow(2, 1, 2) * x.narrow(2, 0, 2),
        "split": lambda x: x.split([1, 3], dim=2),
        "chunk": lambda x: x.chunk(3, 1),
        "unbind": lambda x: x.unbind(0),
        "squeeze": lambda x: x[:, :1].squeeze(1) + x.unsqueeze(0).squeeze()[:, 0],
    }[case]
    check(f, x)


def test_view_aliasing_writes():
    xc = r(4, 6)
    xt = xc.to(DEV)
    for x in (xc, xt):
        v = x.view(6, 4)
        v[1] = 7.0
        x.t()[2].mul_(0)
        x[:, 3:5].add_(1)
    torch.testing.assert_close(xt.cpu(), xc)


# ---- indexing ---------------------------------------------------------------------------------------------

IDX = torch.tensor([2, 0, 3, 3])
IDX_NEG = torch.tensor([-1, 0, -3])


@pytest.mark.parametrize("case", ["slice", "step", "neg_slice", "int", "idx", "idx_dim1", "idx2", "idx_neg",
                                  "idx_2d", "mask", "mask_row", "ellipsis", "none", "idx_slice_idx", "scalar_idx"])
def test_getitem(case):
    x = r(5, 4, 3)
    f = {
        "slice": lambda x: x[1:4],
        "step": lambda x: x[::2, 1:, ::2],
        "neg_slice": lambda x: x[-3:-1, :-1],
        "int": lambda x: x[2, -1],
        "idx": lambda x: x[IDX.to(x.device)],
        "idx_dim1": lambda x: x[:, IDX[:3].clamp(max=3).to(x.device)],
        "idx2": lambda x: x[IDX.to(x.device), torch.tensor([0, 1, 3, 2], device=x.device)],
        "idx_neg": lambda x: x[IDX_NEG.to(x.device)],
        "idx_2d": lambda x: x[torch.tensor([[0, 1], [4, 2]], device=x.device)],
        "mask": lambda x: x[x > 0.3],
        "mask_row": lambda x: x[torch.tensor([True, False, True, True, False], device=x.device)],
        "ellipsis": lambda x: x[..., 1],
        "none": lambda x: x[None, 1:3, None],
        "idx_slice_idx": lambda x: x[IDX.to(x.device), 1:3, torch.tensor([0, 2, 1, 0], device=x.device)],
        "scalar_idx": lambda x: x[torch.tensor(1, device=x.device)],
    }[case]
    check(f, x)


@pytest.mark.parametrize("case", ["idx_scalar", "idx_tensor", "idx_bcast", "mask_zero", "mask_tensor", "slice_set",
                                  "idx2_set", "accumulate", "int_dtype", "neg_idx"])
def test_setitem(case):
    def f(x, v):
        x = x.clone()
        d = x.device
        if case == "idx_scalar":
            x[torch.tensor([0, 3], device=d)] = 2.5
        elif case == "idx_tensor":
            x[torch.tensor([1, 4], device=d)] = v
        elif case == "idx_bcast":
            x[torch.tensor([1, 4], device=d)] = v[0]
        elif case == "mask_zero":
            x[x > 0.2] = 0
        elif case == "mask_tensor":
            x[x[:, 0] > 0] = v[0]
        elif case == "slice_set":
            x[1:3, ::2] = v[:, :2]
        elif case == "idx2_set":
            x[torch.tensor([0, 2, 4], device=d), torch.tensor([1, 1, 0], device=d)] = v[0, :3]
        elif case == "accumulate":
            x.index_put_((torch.tensor([1, 1], device=d),), v * 1, accumulate=True)
        elif case == "neg_idx":
            x[torch.tensor([-1, -5], device=d)] = v
        else:
            x = (x * 10).long()
            x[torch.tensor([0, 2], device=d)] = 9
        return x
    check(f, r(5, 3), r(2, 3, seed=1), grad=case != "int_dtype")


def test_masked_fill():
    x = r(4, 5)
    m = r(4, 5, seed=2) > 0
    check(lambda x, m: x.masked_fill(m, -1.5), x, m)
    check(lambda x, m: x.masked_fill(m[0], float("-inf")), x, m)
    check(lambda x, m, v: x.masked_fill(m, v), x, m, torch.tensor(3.0))
    check(lambda x, m: x.masked_fill(m, 7), r(4, 5, dtype=torch.int64), m, grad=False)
    check(lambda x, m: x.clone().masked_fill_(m, 0.0), x, m)


@pytest.mark.parametrize("diag", [0, 1, -1, 3, -4])
@pytest.mark.parametrize("op", ["triu", "tril"])
def test_triu_tril(op, diag):
    check(lambda x: getattr(torch, op)(x, diag), r(4, 6))
    check(lambda x: getattr(torch, op)(x, diag), r(2, 5, 3))
    check(lambda x: getattr(x.clone(), op + "_")(diag), r(4, 4, dtype=torch.int64), grad=False)


def test_gather_scatter():
    x = r(4, 5)
    i1 = torch.tensor([[0, 1, 1], [3, 0, 2], [4, 4, 0], [2, 1, 3]])
    check(lambda x, i: torch.gather(x, 1, i), x, i1)
    i0 = torch.tensor([[0, 1, 3, 2, 0], [3, 2, 1, 0, 1]])
    check(lambda x, i: torch.gather(x, 0, i), x, i0)
    check(lambda x, i: torch.gather(x, -1, i), x, i1)
    # scatter without duplicate targets, so the result is deterministic
    iu = torch.tensor([[0, 1, 2], [3, 4, 0], [1, 2, 3], [4, 0, 1]])
    check(lambda x, i, s: torch.scatter(x, 1, i, s), x, iu, r(4, 3, seed=1))
    check(lambda x, i: torch.scatter(x, 1, i, 2.5), x, iu)
    check(lambda x, i, s: x.clone().scatter_(1, i, s), x, iu, r(4, 3, seed=1))
    check(lambda x, i, s: torch.scatter_add(x, 1, i, s), x, i1, r(4, 3, seed=1))
    check(lambda x, i, s: torch.scatter_add(x, 0, i, s), x, i0, r(2, 5, seed=3))
    check(lambda x, i, s: x.clone().scatter_add_(0, i, s), x, i0, r(2, 5, seed=3))
    check(lambda x, i, s: torch.scatter_add(x, 1, i, s), r(4, 5, dtype=torch.int64), i1,
          r(4, 3, dtype=torch.int64), grad=False)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    x = r(4, 5, 3)
    idx = torch.tensor([2, 0, 2, 1])
    check(lambda x, i: torch.index_select(x, dim, i), x, idx)
    check(lambda x, i: x.index_select(dim, i), r(4, 5, 3, dtype=torch.int32), idx, grad=False)


def test_index_add_masked_select():
    x, src, idx = r(5, 3), r(4, 3, seed=1), torch.tensor([0, 2, 2, 4])
    check(lambda x, s, i: x.index_add(0, i, s, alpha=-1.5), x, src, idx)
    check(lambda x, s: x.clone().index_add_(1, torch.tensor([2, 0, 2, 1], device=x.device), s), x, r(5, 4, seed=2))
    check(lambda x, m: torch.masked_select(x, m), x, r(3, seed=4) > 0)
    check(lambda x, m, s: x.masked_scatter(m, s), x, r(5, 3, seed=5) > 0, r(16, seed=6))
    check(lambda x: (torch.isnan(x.log()), torch.sgn(x), torch.isnan(x.long())), x, grad=False)


def test_nll_loss_2d():
    x, t = r(2, 4, 3, 5), torch.tensor([[[0, 1, 3, 2, 1], [3, 3, 0, 1, 2], [1, 2, 0, 0, 3]]] * 2)
    w = r(4, lo=0.5, hi=2.0)
    for kw in (dict(), dict(reduction="none"), dict(reduction="sum", ignore_index=3), dict(weight=w),
               dict(weight=w, reduction="none", ignore_index=0)):
        check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, **{k: v.to(x.device) if k == "weight" else v
                                                                for k, v in kw.items()}), x, t, rtol=1e-5, atol=1e-5)


# ---- in-place and out= ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["add_", "add_alpha_", "mul_", "mul_scalar_", "sub_", "div_", "clamp_", "clamp_t_",
                                  "addcmul_", "addcdiv_", "lerp_s_", "lerp_t_", "relu_", "neg_", "exp_",
                                  "add_bcast_", "add_view_", "pow_", "sqrt_", "mul_int_float_"])
def test_inplace(case):
    y = r(3, 4, seed=1)
    z = r(3, 4, seed=2, lo=0.5, hi=2.0)

    def f(x, y, z):
        x = x.clone()
        {
            "add_": lambda: x.add_(y), "add_alpha_": lambda: x.add_(y, alpha=-0.5), "mul_": lambda: x.mul_(y),
            "mul_scalar_": lambda: x.mul_(3), "sub_": lambda: x.sub_(y, alpha=2), "div_": lambda: x.div_(z),
            "clamp_": lambda: x.clamp_(-0.3, 0.4), "clamp_t_": lambda: x.clamp_(min=y, max=y + 0.5),
            "addcmul_": lambda: x.addcmul_(y, z, value=0.3), "addcdiv_": lambda: x.addcdiv_(y, z, value=-2),
            "lerp_s_": lambda: x.lerp_(y, 0.3), "lerp_t_": lambda: x.lerp_(y, z / 2),
            "relu_": lambda: x.relu_(), "neg_": lambda: x.neg_(), "exp_": lambda: x.exp_(),
            "add_bcast_": lambda: x.add_(y[0]), "add_view_": lambda: x[:, 1:3].add_(y[:, :2]),
            "pow_": lambda: x.pow_(2), "sqrt_": lambda: x.abs_().sqrt_(),
            "mul_int_float_": lambda: x.mul_(y),
        }[case]()
        return x
    check(f, r(3, 4), y, z)


def test_inplace_type_rules():
    i = torch.arange(6, device=DEV)
    with pytest.raises(RuntimeError):
        i.add_(torch.ones(6, device=DEV) * 0.5)
    with pytest.raises(RuntimeError):
        torch.ones(3, device=DEV).add_(torch.ones(2, 3, device=DEV))
    f = torch.ones(6, device=DEV)
    f.add_(i)  # float += int is fine
    assert f.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    h = torch.ones(6, dtype=torch.bfloat16, device=DEV)
    h.mul_(torch.full((6,), 3.0, device=DEV))  # bf16 *= f32 stays bf16
    assert h.dtype == torch.bfloat16 and h.cpu().float().tolist() == [3.0] * 6


@pytest.mark.parametrize("case", ["add", "mul", "sub", "div", "clamp", "addcmul", "addcdiv", "lerp", "mm", "sum",
                                  "add_resize", "where", "pow", "exp"])
def test_out(case):
    a, b = r(3, 4), r(3, 4, seed=1, lo=0.5, hi=2.0)

    def f(a, b, out):
        {
            "add": lambda: torch.add(a, b, alpha=2, out=out), "mul": lambda: torch.mul(a, b, out=out),
            "sub": lambda: torch.sub(a, b, out=out), "div": lambda: torch.div(a, b, out=out),
            "clamp": lambda: torch.clamp(a, -0.5, 0.5, out=out),
            "addcmul": lambda: torch.addcmul(a, a, b, value=0.5, out=out),
            "addcdiv": lambda: torch.addcdiv(a, a, b, value=0.5, out=out),
            "lerp": lambda: torch.lerp(a, b, 0.25, out=out), "mm": lambda: torch.mm(a, b.t(), out=out),
            "sum": lambda: torch.sum(a, 1, out=out), "add_resize": lambda: torch.add(a, b, out=out),
            "where": lambda: torch.where(a > 0, a, b, out=out), "pow": lambda: torch.pow(b, 1.5, out=out),
            "exp": lambda: torch.exp(a, out=out),
        }[case]()
        return out
    shape = {"mm": (3, 3), "sum": (3,), "add_resize": (0,)}.get(case, (3, 4))
    check(f, a, b, torch.zeros(shape), grad=False)


def test_out_dtype_cast():
    out = torch.zeros(3, 4, dtype=torch.float64, device=DEV)
    a, b = r(3, 4), r(3, 4, seed=1)
    torch.add(a.to(DEV), b.to(DEV), out=out)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), (a + b).double())
    with pytest.raises(RuntimeError):
        torch.add(a.to(DEV), b.to(DEV), out=torch.zeros(3, 4, dtype=torch.int64, device=DEV))


# ---- optimizers -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("opt", ["adamw", "sgd"])
def test_optimizer_step(opt, foreach):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    dev.load_state_dict(ref.state_dict())
    dev.to(DEV)

    def make(params):
        if opt == "adamw":
            return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=foreach)
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=False, foreach=foreach)
    o_ref, o_dev = make(ref.parameters()), make(dev.parameters())
    x, y = r(8, 6), torch.tensor([0, 1, 2, 0, 1, 2, 2, 1])
    for _ in range(3):
        for m, o, xx, yy in ((ref, o_ref, x, y), (dev, o_dev, x.to(DEV), y.to(DEV))):
            o.zero_grad()
            F.cross_entropy(m(xx), yy).backward()
            o.step()
    for (n, p_ref), p_dev in zip(ref.named_parameters(), dev.parameters()):
        assert p_dev.device.type == "tpu"
        torch.testing.assert_close(p_dev.detach().cpu(), p_ref.detach(), rtol=1e-5, atol=1e-5, msg=n)
    assert not torch.equal(ref[0].weight.detach(), dev[0].weight.detach().cpu() * 0)  # params moved


# ---- fallback accounting ----------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:The operator .* has no tpu lowering")
def test_fallback_is_counted():
    """An op without a lowering runs on CPU, matches CPU and is recorded."""
    x = r(4, 5)
    name = None
    def spd(x):
        return x @ x.mT + x.new_ones(4).diag()

    for cand, f in (("aten::linalg_eig", lambda x: torch.linalg.eig(spd(x))[1]),
                    ("aten::_linalg_eigvals", lambda x: torch.linalg.eigvals(spd(x)))):
        torchtpu.debug.reset_metrics()
        out = f(x.to(DEV))
        fb = torchtpu.debug.metrics()["cpu_fallbacks"]
        if fb:
            name = cand
            torch.testing.assert_close(out.cpu(), f(x))
            assert any(cand.split("::")[1] in k for k in fb), fb
            break
    assert name is not None, "expected linalg.eig or eigvals to have no lowering"
    torchtpu.debug.reset_metrics()

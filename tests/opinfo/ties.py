"""Index outputs that may name another of several equal elements: the ops
of TIE_INDEX_OPS return an index whose choice among ties PyTorch leaves open
(its CPU sorts are not stable for large inputs, nor is its topk/kthvalue
selection), so a device index that differs from the CPU's is accepted when it
selects the same input values (and is a valid permutation for sorts)."""
import torch


# key: (dim position in args, default dim,
# keepdim position or None for outputs that keep the dim, the index output is
# a permutation of each slice, every output is an index).
TIE_INDEX_OPS = {
    "sort": (0, -1, None, True, False), "argsort": (0, -1, None, True, True),
    "topk": (1, -1, None, False, False), "kthvalue": (1, -1, 2, False, False),
    "median": (0, None, 1, False, False), "nanmedian": (0, None, 1, False, False),
    "mode": (0, -1, 1, False, False),
}


def _arg(sample, pos, name, default):
    if name in sample.kwargs:
        return sample.kwargs[name]
    return sample.args[pos] if pos is not None and len(sample.args) > pos else default


def tie_index_check(key, sample):
    """For the ops of TIE_INDEX_OPS without stable=True: a function telling
    whether the leaf at position i of the device's output, an index tensor
    that differs from the CPU's, still selects the same values of the input
    (and is a permutation of each slice for sorts, distinct for topk).
    Returns None for every other op."""
    spec = TIE_INDEX_OPS.get(key)
    if spec is None or sample.kwargs.get("stable") is True or not isinstance(sample.input, torch.Tensor):
        return None
    dim_pos, dim_default, keep_pos, permutation, all_index = spec
    dim = _arg(sample, dim_pos, "dim", dim_default)
    if dim is None:
        return None
    keepdim = True if keep_pos is None else bool(_arg(sample, keep_pos, "keepdim", False))
    x = sample.input.detach().cpu()

    def check(i, a, e):
        if not (all_index or i % 2 == 1) or e.dtype != torch.int64:
            return False
        if x.dim() == 0:
            xs, d, a, e = x.reshape(1), 0, a.reshape(1), e.reshape(1)
        else:
            xs, d = x, dim % x.dim()
            if not keepdim:
                a, e = a.unsqueeze(d), e.unsqueeze(d)
        if a.numel() and ((a < 0).any() or (a >= xs.size(d)).any()):
            return False
        va, ve = xs.gather(d, a), xs.gather(d, e)
        same = (va == ve) | (va != va) & (ve != ve)
        if not bool(same.all()):
            return False
        if permutation:
            ar = torch.arange(xs.size(d)).reshape([-1 if j == d else 1 for j in range(xs.dim())])
            return bool((a.sort(d).values == ar).all())
        s = a.sort(d).values
        return bool((s.narrow(d, 1, s.size(d) - 1) != s.narrow(d, 0, s.size(d) - 1)).all()) if s.size(d) > 1 else True
    return check

"""FlexAttention on the tpu device.

`torch.nn.attention.flex_attention.flex_attention` in PyTorch 2.13 refuses
every device outside {cuda, cpu, xpu, hpu, mps}: its helper
`_validate_device(query, key, value)` keeps that set in a local variable and
raises "FlexAttention is only supported on CUDA, CPU, HPU, or MPS devices".
PyTorch offers no hook to extend it (no device registry, no PrivateUse1 path,
no config flag), and `flex_attention` is its only caller, through a global
lookup in its module. So this module replaces that one global with a wrapper:
a query on tpu passes (tpu also takes the backward that CPU and MPS refuse),
any other device goes to PyTorch's own check, unchanged.

Nothing else of PyTorch is patched. The flex_attention higher-order op and
its backward op get kernels of their own, registered the way PyTorch
registers per-key kernels of a HOP (`py_impl`), each running PyTorch's own
dense implementation:

- flex_attention, PrivateUse1: `sdpa_dense`: scores = q @ kᵀ · scale in
  float32 (float64 for float64 inputs), score_mod and mask_mod vmapped over
  (batch, head, q_idx, kv_idx) into elementwise ops, masked scores set to
  -inf, a safe softmax, @ v, and the logsumexp. What it cannot do right is
  refused first, with an error naming the case.
- flex_attention_backward, PrivateUse1: `sdpa_dense_backward`, told which
  captured score_mod buffers need a gradient by the joint graph rather than
  by the buffers' requires_grad flags, which a compiled backward graph's
  tensors do not carry (see _with_grad_slots).
- flex_attention, AutocastPrivateUse1: casts q, k and v to the autocast
  dtype, as PyTorch's CUDA and CPU autocast kernels of the op do.

Both paths end as ordinary ATen ops on the device, lowered like any other:
- Eager (every mode): `flex_attention` runs the op through Dynamo's "eager"
  backend; the op's autograd function calls the forward kernel below
  autograd, and the backward op on backward.
- torch.compile(backend="tpu"): AOTAutograd keeps the op and its backward
  as nodes of the forward and backward graphs; the backend's capture runs
  each node on tpu tensors, so the kernels' ATen ops become part of the
  captured program.

What is not supported: kernel_options BACKEND="FLASH" (the frontend reads
the logsumexp of that kernel in natural-log units, the dense kernel returns
it in base 2; refused). The block structure of a BlockMask is not
consulted, only its mask_mod, as in PyTorch's CPU path: a BlockMask built
from block indices (BlockMask.from_kv_blocks) must carry a mask_mod that
masks what its blocks mask. torch.compile(create_block_mask) with the
default backend runs as a tpu program even when the mask_mod captures no
tensor (torchtpu routes graphs that make tpu tensors to backend "tpu").
"""
import importlib

import torch
from torch._C import DispatchKey

# Modules, not the functions their packages export under the same names.
_frontend = importlib.import_module("torch.nn.attention.flex_attention")
_hop_module = importlib.import_module("torch._higher_order_ops.flex_attention")

__all__ = []

_DEVICE = "tpu"


def _install_device_check():
    """Wraps the frontend's device allowlist so that tpu passes."""
    original = _frontend._validate_device
    if getattr(original, "_torchtpu", False):
        return

    def _validate_device(query, key, value):
        if query.device.type == _DEVICE:
            return
        original(query, key, value)

    _validate_device._torchtpu = True
    _validate_device.__wrapped__ = original
    _validate_device.__doc__ = original.__doc__
    _frontend._validate_device = _validate_device


def _check_supported(kernel_options):
    backend = kernel_options.get("BACKEND", "AUTO")
    if backend == "FLASH":
        raise NotImplementedError(
            "flex_attention on tpu: kernel_options BACKEND='FLASH' is not supported (it selects a CUDA kernel whose "
            "logsumexp the frontend reads in other units than the dense kernel that runs on tpu); use 'AUTO'")


def _tpu_kernel(query, key, value, score_mod, block_mask, scale, kernel_options,
                score_mod_other_buffers=(), mask_mod_other_buffers=()):
    """The op's tpu kernel: PyTorch's dense implementation."""
    _check_supported(kernel_options)
    return _hop_module.sdpa_dense(query, key, value, score_mod, block_mask, scale, kernel_options,
                                  score_mod_other_buffers, mask_mod_other_buffers)


def _with_grad_slots(joint_graph, buffers):
    """The score_mod's captured buffers, each that the joint graph returns a
    gradient for marked as requiring grad. The dense backward allocates a
    gradient for a buffer only when it requires grad; in eager the buffer
    carries its own flag, but a compiled backward graph gets its tensors
    without autograd metadata (an intermediate is saved detached), while its
    joint graph, traced with the true flags, still has the gradient's slot."""
    if not isinstance(joint_graph, torch.fx.GraphModule) or not buffers:
        return buffers
    grads = joint_graph.graph.output_node().args[0]
    slots = grads[len(grads) - len(buffers):]  # after (score, b, h, q_idx, kv_idx)
    return tuple(b.detach().requires_grad_() if isinstance(b, torch.Tensor) and slot is not None
                 and not b.requires_grad else b for b, slot in zip(buffers, slots))


def _tpu_backward_kernel(query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph, joint_graph,
                         block_mask, scale, kernel_options, score_mod_other_buffers=(), mask_mod_other_buffers=()):
    """The backward op's tpu kernel: PyTorch's dense backward."""
    score_mod_other_buffers = _with_grad_slots(joint_graph, score_mod_other_buffers)
    return _hop_module.sdpa_dense_backward(query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph,
                                           joint_graph, block_mask, scale, kernel_options, score_mod_other_buffers,
                                           mask_mod_other_buffers)


_AUTOCAST = torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)


def _tpu_autocast_kernel(query, key, value, score_mod, block_mask, scale, kernel_options,
                         score_mod_other_buffers=(), mask_mod_other_buffers=()):
    """The op under torch.autocast("tpu"): q, k, v in the autocast dtype."""
    from torch.amp.autocast_mode import _cast

    dtype = torch.get_autocast_dtype(_DEVICE)
    query, key, value = (_cast(t, _DEVICE, dtype) for t in (query, key, value))
    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST):
        return _hop_module.flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
                                          score_mod_other_buffers, mask_mod_other_buffers)


def _register_kernels():
    forward, backward = _hop_module.flex_attention, _hop_module.flex_attention_backward
    for hop, key, kernel in ((forward, DispatchKey.PrivateUse1, _tpu_kernel),
                             (forward, DispatchKey.AutocastPrivateUse1, _tpu_autocast_kernel),
                             (backward, DispatchKey.PrivateUse1, _tpu_backward_kernel)):
        if not hop.has_kernel_for_dispatch_key(key):
            hop.py_impl(key)(kernel)


_install_device_check()
_register_kernels()

"""print(t) for tpu tensors: format one CPU copy (a single transfer) instead of
running the formatter's many small ops on the device. PyTorch's own code still
writes the prefix and the suffixes (device, dtype, grad_fn)."""
import torch
import torch._tensor_str as _tensor_str

_original = _tensor_str._str_intern
_PLAIN = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)


def _str_intern(inp, *, tensor_contents=None):
    # Tensor subclasses (FakeTensor while torch.compile traces, functional
    # and distributed tensors) keep PyTorch's own formatting.
    if (tensor_contents is None and type(inp) in _PLAIN and inp.device.type == "tpu"
            and inp.numel() > 0 and inp.layout == torch.strided and not inp.is_nested):
        plain = type(inp) is torch.Tensor
        indent = len("tensor(" if plain else f"{type(inp).__name__}(")
        with torch.no_grad():
            cpu = torch.autograd.forward_ad.unpack_dual(inp)[0].detach().to("cpu")
        tensor_contents = _tensor_str._tensor_str(cpu, indent)
    return _original(inp, tensor_contents=tensor_contents)


_tensor_str._str_intern = _str_intern

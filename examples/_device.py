"""Pick where the examples run: CUDA tensors when a GPU backend is active, else NumPy on the CPU."""
import numpy as np


def array_module():
    """(to_device, to_host, name): functions moving a NumPy array to the chosen device and back."""
    try:
        import torch
        from tilejit.backends import available_backends
        cuda = available_backends().get("cuda")
        if cuda is not None and cuda.is_active() and torch.cuda.is_available():
            return (lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()), (lambda t: t.cpu().numpy()), "cuda"
    except ImportError:
        pass
    return (lambda a: np.ascontiguousarray(a)), (lambda a: a), "interpreter"

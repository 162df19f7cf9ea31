"""Weft as a torch.distributed backend.

Importing this package registers the backend name "weft", so that

    import torch.distributed as dist
    import weft_torch
    dist.init_process_group("weft", init_method="env://", rank=rank, world_size=world_size)

runs torch.distributed's collectives on CPU tensors through Weft (libnccl.so.2). The rendezvous
uses the c10d store torch hands the backend; no other environment is needed.
"""

import torch.distributed as _dist

from . import _C
from ._C import ProcessGroupWeft, create_process_group

BACKEND_NAME = "weft"

__all__ = ["BACKEND_NAME", "ProcessGroupWeft", "create_process_group", "version"]


def version():
    """Weft's own version string."""
    return _C.version()


# torch asserts when a name is registered twice (a module reloaded, say): register once.
if BACKEND_NAME.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND_NAME, create_process_group)

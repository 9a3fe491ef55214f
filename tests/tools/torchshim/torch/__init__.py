"""A stand-in for the few names of PyTorch that GuideLLM's data loader uses.

GuideLLM (0.8) imports torch for one thing: it hands its request iterator
to torch.utils.data.DataLoader with batch_size=1 and a collate function that
takes the one item. PyPI's torch for Linux x86-64 needs several GB of CUDA
libraries just to import, so the GuideLLM test (tests/integration/
serve_clients.sh) puts this folder on PYTHONPATH when the real torch cannot
be imported. Rows are produced in the calling process, in order.
"""

from . import utils  # noqa: F401

__version__ = "0.0.0+fp4serve-shim"


class Generator:
    """A seed holder: the shim never shuffles."""

    def __init__(self, device=None):
        self.seed = 0

    def manual_seed(self, seed):
        self.seed = int(seed)
        return self

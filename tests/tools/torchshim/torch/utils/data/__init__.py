"""torch.utils.data of the GuideLLM shim (see torch/__init__.py)."""

from .dataloader import DataLoader, get_worker_info
from .dataset import IterableDataset

__all__ = ["DataLoader", "IterableDataset", "get_worker_info"]

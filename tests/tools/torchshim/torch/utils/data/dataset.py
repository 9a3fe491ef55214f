"""IterableDataset of the GuideLLM shim: a base class with nothing in it."""

from typing import Generic, TypeVar

T = TypeVar("T")


class IterableDataset(Generic[T]):
    def __iter__(self):
        raise NotImplementedError

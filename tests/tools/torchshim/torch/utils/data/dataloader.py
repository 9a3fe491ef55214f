"""DataLoader of the GuideLLM shim: iterates the dataset in this process.

Batches of batch_size items (1 in GuideLLM) go through collate_fn; worker
counts, prefetching and pinning are accepted and have no effect, since
there are no worker processes (get_worker_info is always None).
"""

from typing import Generic, TypeVar

T = TypeVar("T")


def get_worker_info():
    return None


class DataLoader(Generic[T]):
    def __init__(self, dataset, batch_size=1, shuffle=False, collate_fn=None, **kwargs):
        if shuffle:
            raise ValueError("the torch shim does not shuffle")
        self.dataset = dataset
        self.batch_size = batch_size or 1
        self.collate_fn = collate_fn or (lambda batch: batch)

    def __iter__(self):
        batch = []
        for item in iter(self.dataset):
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch:
            yield self.collate_fn(batch)

"""The models `put serve` keeps in memory: at most `limit`, least recently used unloaded first, each with its
sampler. A sampler whose capture failed is dropped after its request, so that the next one retries the capture
instead of staying eager (docs/serving.md)."""

from __future__ import annotations

import ctypes
import gc
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from put.models.put_model import PUTModel
from put.sampling.engine import Sampler, resolve_engine
from put.serve.catalog import ModelEntry


def trim_heap() -> None:
    """Hands the heap's free memory back to the system (glibc's malloc_trim): glibc keeps what an unloaded model's
    weights freed in its arenas, so the server's resident memory would stay that of every model it ever loaded.
    Elsewhere (no glibc) nothing."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class LoadedModels:
    def __init__(self, device: str, limit: int, engine: str = "auto") -> None:
        self.device, self.limit, self.engine = device, limit, engine
        self._order: OrderedDict[str, ModelEntry] = OrderedDict()  # loaded (or loading), least recently used first
        self._users: Counter[str] = Counter()
        self._samplers: dict[str, Sampler] = {}
        self._sampler_state: dict[str, dict] = {}
        self._lock = threading.Lock()

    @property
    def loaded(self) -> list[str]:
        with self._lock:
            return list(self._order)

    @contextmanager
    def use(self, entry: ModelEntry) -> Iterator[tuple[PUTModel, Sampler]]:
        """The entry's model (loaded if need be, after others were unloaded to make room) and its sampler."""
        with self._lock:
            self._users[entry.id] += 1
            self._order[entry.id] = entry
            self._order.move_to_end(entry.id)
            evicted = self._evict()
        self._release(evicted)  # before loading: memory holds `limit` models at most
        sampler = None
        try:
            model = entry.load(self.device)
            with self._lock:
                sampler = self._samplers.get(entry.id)
                if sampler is None or sampler.model is not model:
                    sampler = self._samplers[entry.id] = Sampler(model, self.engine)
            yield model, sampler
        finally:
            with self._lock:
                self._users[entry.id] -= 1
                if sampler is not None:
                    self._record(entry.id, sampler)
                evicted = self._evict()
            self._release(evicted)

    def _record(self, entry_id: str, sampler: Sampler) -> None:
        if sampler.fallback:  # dropped: the next request builds and captures anew
            self._samplers.pop(entry_id, None)
            self._sampler_state[entry_id] = {
                "sampler": "eager", "why": f"the {resolve_engine(self.engine, torch.device(self.device))} engine "
                f"failed on the last request ({sampler.fallback}); the next request tries it again"}
        else:
            self._sampler_state[entry_id] = {"sampler": sampler.kind, "why": f"engine {self.engine!r} on {self.device}"}

    def _evict(self) -> list[ModelEntry]:
        """Beyond the limit, the least recently used models not in use leave the list (unloaded by `_release`)."""
        evicted = []
        for entry_id in list(self._order):
            if len(self._order) <= self.limit:
                break
            if self._users[entry_id] == 0:
                evicted.append(self._order.pop(entry_id))
                self._samplers.pop(entry_id, None)
                self._sampler_state.pop(entry_id, None)
        return evicted

    def _release(self, evicted: list[ModelEntry]) -> None:
        for entry in evicted:
            entry.unload()
        if evicted:
            gc.collect()  # the weights go now, not at some later collection
            trim_heap()
            if torch.cuda.is_available() and self.device.startswith("cuda"):
                torch.cuda.empty_cache()

    def describe(self, entry_id: str) -> dict:
        """For /api/info: whether the model is loaded, and which sampler its last request used and why."""
        with self._lock:
            state = self._sampler_state.get(entry_id, {"sampler": None, "why": "no request sampled yet"})
            return {"loaded": entry_id in self._order, **state}

"""One LRU of per-problem data (inputs, references) for every hardware agent.

Generating inputs and float64 references costs far more than a profile of a small kernel,
and every candidate of a problem uses the same cases, so each agent keeps the last few
problems. Entries are built by the agent's `build(problem, seeds, root)` (`get`), or, for
an agent whose entries depend on more than the seeds (the Triton agent's plan and device),
by a callable given with its own key (`lookup`); `root` is a directory for data an agent
must stage as files (made on first use when the cache is given a `prefix`, with `mode`:
0700, or 0755 when sandboxed children of other uids must read the inputs; removed by
`close()`, garbage collection or interpreter exit), or None for in-memory data. An entry
with a `remove()` method is told when it is evicted or the cache is closed.
"""

from __future__ import annotations

import os
import shutil
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

from accelopt.problem import Problem
from hardware_agents.sandbox import default_base_dir, private_dir

T = TypeVar("T")


class DataCache(Generic[T]):
    def __init__(
        self,
        build: Callable[[Problem, tuple[int, ...], Path | None], T],
        *,
        capacity: int = 3,
        base_dir: Path | None = None,
        prefix: str | None = None,
        mode: int = 0o700,
    ) -> None:
        self.build = build
        self.capacity = capacity
        self._base = base_dir
        self._prefix = prefix
        self._mode = mode
        self._root: Path | None = None
        self._finalizer: weakref.finalize | None = None
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def root(self) -> Path | None:
        if self._prefix is None:
            return None
        if self._root is None:
            self._root = private_dir(self._base or default_base_dir(), self._prefix)
            os.chmod(self._root, self._mode)
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._root), True)
        return self._root

    def get(self, problem: Problem, seeds: tuple[int, ...]) -> T:
        """The entry of (problem content, seeds), built by the cache's `build` on a miss."""
        return self.lookup((problem.content_hash(), seeds), lambda root: self.build(problem, seeds, root))

    def lookup(self, key: Hashable, build: Callable[[Path | None], T]) -> T:
        """The entry under `key`, built by `build(root)` on a miss (the least recent beyond
        `capacity` is evicted)."""
        with self._lock:  # generation is serialised: two threads never build the same data twice
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
                return data
            data = build(self.root)
            self._items[key] = data
            while len(self._items) > self.capacity:
                _, old = self._items.popitem(last=False)
                remove = getattr(old, "remove", None)
                if remove is not None:
                    remove()
            return data

    def entries(self) -> list[tuple[Hashable, T]]:
        """(key, entry) of what the cache holds now, least recent first."""
        with self._lock:
            return list(self._items.items())

    def close(self) -> None:
        with self._lock:
            for item in self._items.values():
                remove = getattr(item, "remove", None)
                if remove is not None:
                    remove()
            self._items.clear()
            if self._finalizer is not None:
                self._finalizer()  # removes the directory, once
            self._root, self._finalizer = None, None

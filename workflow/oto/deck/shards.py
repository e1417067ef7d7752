"""Shards of the deck: which libraries one tester tunes.

A library's shard is a hash of its name, not its position in the deck, so adding or removing libraries never
moves the others: a tester who ran shard 2/4 last week still holds the same libraries of shard 2/4 today.
Shards are balanced in expectation only (46 libraries in 4 shards: about 11 each, give or take 3).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SHARD = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$")


class ShardError(ValueError):
    pass


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based: shard 1 of n … shard n of n
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        m = _SHARD.match(str(text))
        if not m:
            raise ShardError(f"shard {text!r} is not i/n (for example 2/4)")
        index, count = int(m[1]), int(m[2])
        if count < 1:
            raise ShardError(f"shard {text!r}: n must be at least 1 (for example 2/4)")
        if not 1 <= index <= count:
            raise ShardError(f"shard {text!r}: i must be between 1 and n (for example 2/4)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, library: str) -> bool:
        return shard_index(library, self.count) == self.index

    def select(self, libraries: Iterable[str]) -> list[str]:
        return sorted(lib for lib in libraries if self.holds(lib))


def shard_index(library: str, count: int) -> int:
    """The 1-based shard of ``library`` among ``count`` shards: sha256 of the name, modulo ``count``."""
    digest = hashlib.sha256(library.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1

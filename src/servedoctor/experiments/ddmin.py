"""Delta debugging minimisation (Zeller & Hildebrandt, TSE 2002), as a pure function.

``ddmin(items, works)`` takes a list of changes that together make the server work
(``works(items)`` is true) and returns a subset that still works and is *1-minimal*:
removing any single change from it makes ``works`` false. ``works([])`` is assumed false
(the unchanged command fails); the function never calls it with an empty list.

Results of ``works`` are cached per subset, so no subset is ever tried twice. ``ahead``,
when given, is told the subsets a round may test, in the order it tests them, before the
first is tested (``fix --parallel`` launches them side by side); the answers are still read
in that order, so the result is the same with or without it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

__all__ = ["ddmin", "split"]


def split(items: Sequence[T], n: int) -> list[list[T]]:
    """Cut ``items`` into ``n`` contiguous chunks whose sizes differ by at most one."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    chunks: list[list[T]] = []
    start = 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(list(items[start:end]))
        start = end
    return chunks


def ddmin(
    items: Sequence[T],
    works: Callable[[list[T]], bool],
    *,
    ahead: Callable[[list[list[T]]], None] | None = None,
) -> list[T]:
    """Minimise ``items`` to a 1-minimal subset on which ``works`` holds (order is kept)."""
    cache: dict[frozenset[T], bool] = {}

    def announce(subsets: list[list[T]]) -> None:
        if ahead is not None:
            fresh = [s for s in subsets if frozenset(s) not in cache]
            if fresh:
                ahead(fresh)

    def test(subset: list[T]) -> bool:
        key = frozenset(subset)
        if key not in cache:
            cache[key] = bool(works(list(subset)))
        return cache[key]

    current = list(dict.fromkeys(items))
    n = 2
    while len(current) >= 2:
        chunks = split(current, n)
        announce([c for c in chunks if len(c) < len(current)])
        for chunk in chunks:
            if len(chunk) < len(current) and test(chunk):
                current, n = chunk, 2
                break
        else:
            announce([[x for x in current if x not in c] for c in chunks])
            for chunk in chunks:
                complement = [x for x in current if x not in chunk]
                if complement and test(complement):
                    current, n = complement, max(n - 1, 2)
                    break
            else:
                if n >= len(current):
                    break
                n = min(len(current), 2 * n)
    return current

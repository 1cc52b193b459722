from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from servedoctor.experiments.ddmin import ddmin, split

items_st = st.lists(st.integers(0, 40), min_size=1, max_size=14, unique=True)


@given(items_st, st.integers(1, 20))
def test_split_keeps_every_item_in_order(items: list[int], n: int) -> None:
    chunks = split(items, n)
    assert [x for c in chunks for x in c] == items
    sizes = [len(c) for c in chunks]
    assert max(sizes) - min(sizes) <= 1
    assert all(sizes)


@given(st.data(), items_st)
def test_monotone_target_is_found_exactly(data: st.DataObject, items: list[int]) -> None:
    """When 'works' means 'contains every needed change', ddmin returns exactly those."""
    needed = set(data.draw(st.lists(st.sampled_from(items), min_size=1, unique=True)))
    result = ddmin(items, lambda s: needed <= set(s))
    assert set(result) == needed
    assert result == [x for x in items if x in needed]


@given(st.data(), items_st)
def test_result_is_one_minimal_for_any_predicate(data: st.DataObject, items: list[int]) -> None:
    """Arbitrary (non-monotone) predicates: the result works and no single removal does."""
    truth: dict[frozenset[int], bool] = {}

    def works(subset: list[int]) -> bool:
        key = frozenset(subset)
        if not key:
            return False
        if key == frozenset(items):
            return True
        if key not in truth:
            truth[key] = data.draw(st.booleans(), label=f"works{sorted(key)}")
        return truth[key]

    result = ddmin(items, works)
    assert set(result) <= set(items)
    assert works(result)
    if len(result) > 1:
        for x in result:
            assert not works([y for y in result if y != x])


@given(items_st)
def test_never_tries_a_subset_twice_nor_the_empty_set(items: list[int]) -> None:
    seen: list[frozenset[int]] = []

    def works(subset: list[int]) -> bool:
        seen.append(frozenset(subset))
        return items[-1] in subset

    assert ddmin(items, works) == [items[-1]]
    assert len(seen) == len(set(seen))
    assert frozenset() not in seen


def test_two_needed_among_eight_costs_few_tests() -> None:
    calls: list[list[str]] = []
    items = list("abcdefgh")

    def works(subset: list[str]) -> bool:
        calls.append(subset)
        return {"b", "g"} <= set(subset)

    assert ddmin(items, works) == ["b", "g"]
    assert len(calls) <= 16

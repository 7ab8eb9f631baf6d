"""Keyset pagination for the long lists (an annotator's queue, discussions, the adjudication
queue, the run list): a page is "the next `size` rows after this one" in a fixed order, so every
page costs the same however deep it is — no OFFSET that reads and throws away the rows before it,
and no page that shifts when a row is added in front of it.

A cursor is the primary key of the page's boundary row (`?after=<pk>` / `?before=<pk>`): the
boundary's sort values are read back with one small query, so the order may use joined columns
(`study__name`) and dates without serialising them into the URL. The order's columns must be
non-null, and the last one must be unique (the primary key is appended if it is not there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import or_

from django.db.models import Q, QuerySet


class CursorError(ValueError):
    """A malformed `after`/`before` parameter (the views answer 400 with this message)."""


@dataclass
class KeysetPage:
    items: list
    after: int | None = None  # cursor of the next page, if there is one
    before: int | None = None  # cursor of the previous page, if there is one
    first: bool = True  # this is the first page (no cursor was given)
    extra: dict = field(default_factory=dict)

    @property
    def has_other_pages(self) -> bool:
        return self.after is not None or self.before is not None


def _cursor(params: Mapping[str, str], name: str) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise CursorError(f"{name!r} must be the number of a row in this list, got {raw[:40]!r}")
    return int(raw)


def _beyond(keys: Sequence[str], values: Sequence, *, forward: bool) -> Q:
    """Rows strictly after (forward) or before the boundary row in the order `keys`."""
    clauses = []
    for i, key in enumerate(keys):
        name, descending = key.lstrip("-"), key.startswith("-")
        op = "gt" if forward != descending else "lt"
        equal = {k.lstrip("-"): v for k, v in zip(keys[:i], values[:i], strict=True)}
        clauses.append(Q(**equal, **{f"{name}__{op}": values[i]}))
    return reduce(or_, clauses)


def keyset_page(
    qs: QuerySet, *, order: Sequence[str], params: Mapping[str, str], size: int = 50, boundary: QuerySet | None = None
) -> KeysetPage:
    """The page of `qs` (sorted by `order`) that `params` (`request.GET`) asks for. Two queries at
    most: the boundary row's sort values, and the page itself (one row more than `size`, to know
    whether another page follows). The boundary row is read from the model's base manager, or from
    `boundary` when the order uses an annotation (a queryset with the same annotation, unfiltered)."""
    keys = list(order) if order[-1].lstrip("-") == "pk" else [*order, "pk"]
    after, before = _cursor(params, "after"), _cursor(params, "before")
    if after is not None and before is not None:
        raise CursorError("give 'after' or 'before', not both")
    cursor = after if after is not None else before
    if cursor is None:
        rows = list(qs.order_by(*keys)[: size + 1])
        return KeysetPage(items=rows[:size], after=rows[size - 1].pk if len(rows) > size else None)
    source = boundary if boundary is not None else qs.model._base_manager.all()
    boundary = source.filter(pk=cursor).values_list(*(k.lstrip("-") for k in keys)).first()
    if boundary is None:
        raise CursorError(f"row {cursor} no longer exists: start again from the first page")
    forward = after is not None
    reverse = [k[1:] if k.startswith("-") else f"-{k}" for k in keys]
    rows = list(
        qs.filter(_beyond(keys, boundary, forward=forward)).order_by(*(keys if forward else reverse))[: size + 1]
    )
    more = len(rows) > size
    rows = rows[:size]
    if forward:
        return KeysetPage(items=rows, after=rows[-1].pk if more else None, before=rows[0].pk if rows else None,
                          first=False)  # fmt: skip
    rows.reverse()
    return KeysetPage(items=rows, after=rows[-1].pk if rows else None, before=rows[0].pk if more else None,
                      first=not more)  # fmt: skip

"""Every route in the URL conf, and its URLs for one own and one foreign id per parameter."""

from __future__ import annotations

import itertools

from django.urls import URLPattern, URLResolver, get_resolver

# `<int:pk>` names a different object under each API prefix
PK = {"api/runs/": "run_id", "api/imports/": "batch_id", "api/codebooks/": "codebook_id"}


def routes(resolver=None, prefix: str = ""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # Django's admin (staff only) has its own protections
            yield from routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def parameters(route: str) -> list[tuple[str, str]]:
    """The route's parameters in order: (their text in the route, the id they take)."""
    found = []
    for part in route.split("<")[1:]:
        text = "<" + part.split(">")[0] + ">"
        name = text.strip("<>").split(":")[-1]
        if name == "pk":
            name = next(value for prefix, value in PK.items() if route.startswith(prefix))
        found.append((text, name))
    return found


def url_for(route: str, ids: dict) -> str:
    """The route with each parameter filled from `ids` (parameter name -> id)."""
    url = "/" + route
    for text, name in parameters(route):
        url = url.replace(text, str(ids[name]))
    return url


def urls(route: str, own: dict, foreign: dict) -> dict[str, str]:
    """The route's URLs for every choice of an own or a foreign id per parameter, by what they hold: "own" (every
    id own), "foreign" (every id foreign), else e.g. "run_id own, context_id foreign". Parameters whose own and
    foreign ids are the same object (the study, the codebook) do not multiply the URLs."""
    varying = [name for _, name in parameters(route) if own[name] != foreign[name]]
    found: dict[str, str] = {}
    for choice in itertools.product(("own", "foreign"), repeat=len(varying)):
        sides = dict(zip(varying, choice, strict=True))
        ids = {**own, **{name: (own if side == "own" else foreign)[name] for name, side in sides.items()}}
        if len(set(choice)) <= 1:
            label = choice[0] if choice else "own"
        else:
            label = ", ".join(f"{name} {side}" for name, side in sides.items())
        found.setdefault(label, url_for(route, ids))
    if not varying:
        found["foreign"] = found["own"]
    return found

"""Every route in the URL conf, with its int parameters filled from candidate ids."""

from __future__ import annotations

import itertools

from django.urls import URLPattern, URLResolver, get_resolver


def routes(resolver=None, prefix: str = ""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # Django's admin (staff only) has its own protections
            yield from routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def fill(route: str, ids: list[int], slugs: tuple[str, ...] = ("labels",)) -> list[str]:
    parts = [part.split(">")[0] for part in route.split("<")[1:]]
    if not parts:
        return ["/" + route]
    choices = [slugs if part.startswith("slug:") else ids for part in parts]
    urls = []
    for combo in itertools.product(*choices):
        url = route
        for part, value in zip(parts, combo, strict=True):
            url = url.replace(f"<{part}>", str(value))
        urls.append("/" + url)
    return urls

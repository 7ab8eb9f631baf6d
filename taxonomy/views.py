from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from accounts.roles import is_admin
from common.htmx import HtmxHttpRequest
from common.text import text_check

from . import services
from .models import Codebook, FrozenCodebookError, OpenDraftError
from .selectors import codebook_tree
from .tree import TEXT_FIELDS, TreeError, parse_key_map, parse_parts

MAX_CSV_BYTES = 2 * 1024 * 1024


def _require_admin(request: HtmxHttpRequest) -> None:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins can change codebooks.")


@require_GET
def codebook_list(request: HtmxHttpRequest) -> HttpResponse:
    codebooks = Codebook.objects.select_related("parent").order_by("name", "-version")
    return render(request, "taxonomy/codebook_list.html", {"codebooks": codebooks})


@require_GET
def codebook_detail(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    tree = codebook_tree(codebook=codebook)
    counts = {
        "categories": len(tree),
        "subcategories": sum(len(c.children) for c in tree),
        "modes": sum(len(s.children) for c in tree for s in c.children),
    }
    return render(request, "taxonomy/codebook_detail.html", {"codebook": codebook, "tree": tree, "counts": counts})


EDIT_OPERATIONS = ("create", "update", "merge", "split", "delete")


def _edit_op(request: HtmxHttpRequest, codebook: Codebook) -> str:
    """One editor operation from the POST: its service does the checking; returns what was done."""
    post, user = request.POST, request.user
    op = post.get("op", "")
    if op == "create":
        texts = {name: post.get(name, "") for name in ("definition",)}
        code = services.code_create(
            codebook=codebook, level=post.get("level", ""), name=post.get("name", ""), key=post.get("key", ""),
            parent_key=post.get("parent_key", ""), user=user, **texts,
        )  # fmt: skip
        return f"Added {code.level} {code.name} ({code.key})."
    if op in ("update", "delete"):
        code = codebook.codes.filter(pk=post.get("code") or 0).first()
        if code is None:
            raise TreeError("no such code in this codebook", column="code")
        if op == "delete":
            services.code_delete(code=code, user=user)
            return f"Removed {code.key}."
        with transaction.atomic():  # the rename and the texts, both or neither
            if post.get("name", code.name) != code.name or post.get("key", code.key) != code.key:
                services.code_rename(code=code, name=post.get("name", ""), key=post.get("key", ""), user=user)
            texts = {name: post[name] for name in TEXT_FIELDS if name in post and post[name] != getattr(code, name)}
            if texts:
                services.code_update(code=code, **texts)
        return f"Saved {code.name} ({code.key})."
    if op == "merge":
        keys = post.get("keys", "").replace(",", " ").split()
        target = services.codes_merge(
            codebook=codebook, keys=keys, into=post.get("into", ""), name=post.get("name", ""), user=user
        )
        return f"Merged into {target.name} ({target.key})."
    if op == "split":
        code = codebook.codes.filter(key=text_check(post.get("key", "").strip(), field="key", max_length=100)).first()
        if code is None:
            raise TreeError(f"{post.get('key', '')!r} is not a key in this codebook", column="key")
        children = {old: new[0] for old, new in parse_key_map(post.get("children", ""), column="children").items()}
        parts = services.code_split(code=code, parts=parse_parts(post.get("parts", "")), children=children, user=user)
        return f"Split {code.key} into {', '.join(p.key for p in parts)}."
    raise TreeError(f"unknown operation {op!r}", column="op")


@require_http_methods(["GET", "POST"])
def codebook_edit(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    """The draft editor: create, rename, merge, split and delete codes, edit their texts. A frozen
    codebook is not edited (make a new version)."""
    _require_admin(request)
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    if codebook.is_frozen:
        messages.error(request, f"{codebook} is frozen: make a new version to change it.")
        if request.method == "POST" and not request.htmx:
            # a change sent to a frozen codebook is refused as a conflict, not answered as if it had been taken
            return render(request, "taxonomy/codebook_frozen.html", {"codebook": codebook}, status=409)
        if request.htmx:
            return HttpResponseClientRedirect(reverse("taxonomy:codebook_detail", args=[codebook.pk]))
        return redirect("taxonomy:codebook_detail", codebook_id=codebook.pk)
    error, done = "", ""
    if request.method == "POST":
        try:
            done = _edit_op(request, codebook)
        except (TreeError, FrozenCodebookError, ValueError) as exc:
            error = f"{exc} — nothing was changed."
        else:
            if not request.htmx:
                messages.success(request, done)
                return redirect("taxonomy:codebook_edit", codebook_id=codebook.pk)
    codebook.refresh_from_db()
    tree = codebook_tree(codebook=codebook)
    context = {"codebook": codebook, "tree": tree, "error": error, "done": done, "text_fields": TEXT_FIELDS}
    template = "taxonomy/codebook_edit.html#editor" if request.htmx else "taxonomy/codebook_edit.html"
    return render(request, template, context, status=422 if error else 200)


@require_GET
def codebook_export(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    response = HttpResponse(services.codebook_csv(codebook), content_type="text/csv; charset=utf-8")
    slug = "".join(ch if ch.isalnum() else "-" for ch in codebook.name.lower()).strip("-")
    response["Content-Disposition"] = f'attachment; filename="{slug}-v{codebook.version}.csv"'
    return response


@require_http_methods(["GET", "POST"])
def codebook_import(request: HtmxHttpRequest) -> HttpResponse:
    _require_admin(request)
    error = ""
    if request.method == "POST":
        upload = request.FILES.get("file")
        if upload is None:
            error = "Choose a CSV file."
        elif upload.size > MAX_CSV_BYTES:
            error = f"{upload.name} is larger than {MAX_CSV_BYTES // 1024} KiB."
        else:
            try:
                text = upload.read().decode("utf-8-sig")
                codebook = services.codebook_import_csv(
                    text=text, name=request.POST.get("name") or None, user=request.user
                )
            except UnicodeDecodeError:
                error = f"{upload.name} is not UTF-8 text."
            except TreeError as exc:
                error = f"{upload.name}: {exc} — nothing was imported."
            else:
                messages.success(request, f"Imported {codebook} as a draft.")
                return redirect("taxonomy:codebook_detail", codebook_id=codebook.pk)
    return render(request, "taxonomy/codebook_import.html", {"error": error}, status=422 if error else 200)


@require_POST
def codebook_new_version(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    _require_admin(request)
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    try:
        new = services.codebook_new_version(
            codebook=codebook, change_log=request.POST.get("change_log", ""), user=request.user
        )
    except OpenDraftError as exc:
        messages.error(request, str(exc))
        return redirect("taxonomy:codebook_detail", codebook_id=exc.draft.pk)
    messages.success(request, f"Created {new} from v{codebook.version}.")
    return redirect("taxonomy:codebook_detail", codebook_id=new.pk)


@require_POST
def codebook_freeze(request: HtmxHttpRequest, codebook_id: int) -> HttpResponse:
    _require_admin(request)
    codebook = get_object_or_404(Codebook, pk=codebook_id)
    services.codebook_freeze(codebook=codebook, user=request.user)
    messages.success(request, f"{codebook} is frozen: studies can pin it, nobody can change it.")
    return redirect("taxonomy:codebook_detail", codebook_id=codebook.pk)

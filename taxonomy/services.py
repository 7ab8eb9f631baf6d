"""Writes for codebooks: load the study default, new versions, freezing, CSV import."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from activity.services import record
from config.spreadsheet import spreadsheet_safe, spreadsheet_unsafe

from .models import Code, Codebook, FrozenCodebookError
from .tree import CSV_COLUMNS, CodeSpec, TreeError, slugify_key, validate

DEFAULT_CODEBOOK = Path(__file__).parent / "data" / "study_codebook.json"


@transaction.atomic
def codebook_create_from_specs(
    *,
    name: str,
    version: int,
    specs: list[CodeSpec],
    description: str = "",
    parent: Codebook | None = None,
    change_log: str = "",
    user=None,
) -> Codebook:
    ordered = validate(specs)
    if Codebook.objects.filter(name=name, version=version).exists():
        raise TreeError(f"codebook {name!r} version {version} already exists")
    codebook = Codebook.objects.create(
        name=name, version=version, description=description, parent=parent, change_log=change_log, created_by=user
    )
    created: dict[str, Code] = {}
    for position, spec in enumerate(_tree_order(ordered)):
        created[spec.key] = Code.objects.create(
            codebook=codebook,
            level=spec.level,
            parent=created.get(spec.parent_key),
            key=spec.key,
            name=spec.name,
            definition=spec.definition,
            inclusion=spec.inclusion,
            exclusion=spec.exclusion,
            example=spec.example,
            position=position,
        )
    origin = f"from {parent}" if parent else "new"
    record("codebook.create", f"{codebook} created ({origin}, {len(created)} codes)", actor=user,
           codebook_id=codebook.pk, parent_id=parent.pk if parent else None, change_log=change_log)  # fmt: skip
    return codebook


def _tree_order(specs: list[CodeSpec]) -> list[CodeSpec]:
    """Depth-first: each category, then its subcategories, each followed by its modes."""
    children: dict[str, list[CodeSpec]] = {}
    for spec in specs:
        children.setdefault(spec.parent_key, []).append(spec)
    out: list[CodeSpec] = []

    def walk(key: str) -> None:
        for child in children.get(key, []):
            out.append(child)
            walk(child.key)

    walk("")
    return out


def default_codebook_specs(path: Path = DEFAULT_CODEBOOK) -> tuple[dict, list[CodeSpec]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    specs: list[CodeSpec] = []
    for category in data["categories"]:
        cat_key = slugify_key(category["name"])
        specs.append(
            CodeSpec(key=cat_key, level="category", name=category["name"], definition=category.get("definition", ""))
        )
        for sub in category["subcategories"]:
            sub_key = slugify_key(sub["name"])
            specs.append(
                CodeSpec(
                    key=sub_key,
                    level="subcategory",
                    name=sub["name"],
                    parent_key=cat_key,
                    definition=sub.get("definition", ""),
                )
            )
            for mode_name, definition in sub["modes"]:
                specs.append(
                    CodeSpec(
                        key=slugify_key(mode_name),
                        level="mode",
                        name=mode_name,
                        parent_key=sub_key,
                        definition=definition,
                    )
                )
    return data, specs


@transaction.atomic
def codebook_load_default(*, freeze: bool = True) -> Codebook:
    """The study's codebook, frozen; idempotent (returns the stored one if present)."""
    data, specs = default_codebook_specs()
    existing = Codebook.objects.filter(name=data["name"], version=data["version"]).first()
    if existing is not None:
        return existing
    codebook = codebook_create_from_specs(
        name=data["name"], version=data["version"], specs=specs, description=data.get("description", "")
    )
    if freeze:
        codebook_freeze(codebook=codebook)
    return codebook


def codebook_freeze(*, codebook: Codebook, user=None) -> Codebook:
    if not codebook.is_frozen:
        codebook.status = Codebook.Status.FROZEN
        codebook.frozen_at = timezone.now()
        codebook.save(update_fields=["status", "frozen_at"])
        record("codebook.freeze", f"{codebook.name} v{codebook.version} frozen", actor=user, codebook_id=codebook.pk)
    return codebook


def codebook_specs(codebook: Codebook) -> list[CodeSpec]:
    return [
        CodeSpec(
            key=c.key,
            level=c.level,
            name=c.name,
            parent_key=c.parent.key if c.parent else "",
            definition=c.definition,
            inclusion=c.inclusion,
            exclusion=c.exclusion,
            example=c.example,
        )
        for c in codebook.codes.select_related("parent").order_by("position")
    ]


@transaction.atomic
def codebook_new_version(
    *, codebook: Codebook, change_log: str = "", user=None, specs: list[CodeSpec] | None = None
) -> Codebook:
    """A new draft version derived from `codebook` (same keys unless `specs` says otherwise)."""
    latest = Codebook.objects.filter(name=codebook.name).order_by("-version").first()
    return codebook_create_from_specs(
        name=codebook.name,
        version=(latest.version if latest else codebook.version) + 1,
        specs=specs if specs is not None else codebook_specs(codebook),
        description=codebook.description,
        parent=codebook,
        change_log=change_log,
        user=user,
    )


def code_update(*, code: Code, **fields: str) -> Code:
    if code.codebook.is_frozen:
        raise FrozenCodebookError(f"{code.codebook} is frozen; make a new version to change it")
    allowed = {"name", "definition", "inclusion", "exclusion", "example"}
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"cannot change {', '.join(sorted(unknown))}")
    before = {key: getattr(code, key) for key in fields}
    for key, value in fields.items():
        setattr(code, key, value)
    code.save(update_fields=list(fields))
    record("code.update", f"{code.key} in {code.codebook} edited ({', '.join(sorted(fields))})",
           codebook_id=code.codebook_id, code=code.key, before=before, after=dict(fields))  # fmt: skip
    return code


# -- CSV ---------------------------------------------------------------------------------


def codebook_csv(codebook: Codebook) -> str:
    codes = list(codebook.codes.select_related("parent__parent").order_by("position"))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for code in codes:
        path = [code.name]
        node = code.parent
        while node is not None:
            path.insert(0, node.name)
            node = node.parent
        writer.writerow(
            {
                column: spreadsheet_safe(value)
                for column, value in {
                    "key": code.key,
                    "level": code.level,
                    "parent_key": code.parent.key if code.parent else "",
                    "path": " > ".join(path),
                    "name": code.name,
                    "definition": code.definition,
                    "inclusion": code.inclusion,
                    "exclusion": code.exclusion,
                    "example": code.example,
                    "codebook": codebook.name,
                    "version": codebook.version,
                }.items()
            }
        )
    return out.getvalue()


def codebook_import_csv(*, text: str, name: str | None = None, user=None) -> Codebook:
    """Create a draft codebook from CSV (the export's shape). Any bad row rejects the whole file."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("key", "level", "parent_key", "name") if c not in (reader.fieldnames or [])]
    if missing:
        raise TreeError(f"missing column(s): {', '.join(missing)}", row=1)
    specs: list[CodeSpec] = []
    names, versions = set(), set()
    for row_no, row in enumerate(reader, start=2):
        specs.append(
            CodeSpec(
                key=spreadsheet_unsafe(row.get("key")).strip(),
                level=spreadsheet_unsafe(row.get("level")).strip(),
                name=spreadsheet_unsafe(row.get("name")).strip(),
                parent_key=spreadsheet_unsafe(row.get("parent_key")).strip(),
                definition=spreadsheet_unsafe(row.get("definition")),
                inclusion=spreadsheet_unsafe(row.get("inclusion")),
                exclusion=spreadsheet_unsafe(row.get("exclusion")),
                example=spreadsheet_unsafe(row.get("example")),
                row=row_no,
            )
        )
        if row.get("codebook"):
            names.add(spreadsheet_unsafe(row["codebook"]))
        if row.get("version"):
            versions.add(row["version"])
    if not specs:
        raise TreeError("no codes in the file")
    if len(names) > 1 or len(versions) > 1:
        raise TreeError("all rows must name the same codebook and version")
    final_name = name or (names.pop() if names else "")
    if not final_name:
        raise TreeError("no codebook name: add a 'codebook' column or give a name")
    try:
        version = int(versions.pop()) if versions else 1
    except ValueError as exc:
        raise TreeError("version must be a whole number", row=2, column="version") from exc
    return codebook_create_from_specs(name=final_name, version=version, specs=specs, user=user)

"""Writes for codebooks: load the study default, new versions, freezing, CSV import."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from activity.services import record
from common.spreadsheet import spreadsheet_safe, spreadsheet_unsafe
from common.text import TextError, model_text, text_check

from .models import Code, Codebook, FrozenCodebookError, OpenDraftError
from .tree import CSV_COLUMNS, LEVELS, PARENT_LEVEL, SLUG, TEXT_FIELDS, CodeSpec, TreeError, slugify_key, validate

DEFAULT_CODEBOOK = Path(__file__).parent / "data" / "study_codebook.json"
MAST_CODEBOOK = Path(__file__).parent / "data" / "mast_codebook.json"


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
            position=position,
            **{name: getattr(spec, name) for name in TEXT_FIELDS},
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
    """The study codebook's data file as specs. A mode is `[name, definition]` or `[name,
    definition, {more texts}]` (inclusion, exclusion, positive_example, negative_example, source)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    specs: list[CodeSpec] = []
    for category in data["categories"]:
        cat_key = slugify_key(category["name"])
        specs.append(
            CodeSpec(
                key=cat_key,
                level="category",
                name=category["name"],
                definition=category.get("definition", ""),
                source=category.get("source", ""),
            )
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
                    source=sub.get("source", ""),
                )
            )
            for mode_name, definition, *more in sub["modes"]:
                texts = more[0] if more else {}
                unknown = set(texts) - set(TEXT_FIELDS)
                if unknown:
                    raise TreeError(f"{mode_name}: unknown field(s) {', '.join(sorted(unknown))} in {path.name}")
                specs.append(
                    CodeSpec(
                        key=slugify_key(mode_name),
                        level="mode",
                        name=mode_name,
                        parent_key=sub_key,
                        definition=definition,
                        **texts,
                    )
                )
    return data, specs


def mast_codebook_specs(path: Path = MAST_CODEBOOK) -> tuple[dict, list[CodeSpec]]:
    """The MAST preset's data file as specs. MAST has two levels (category → mode); each category gets
    one subcategory of its own name (key `<category key>-modes`) that holds its modes (docs/taxonomy.md)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    specs: list[CodeSpec] = []
    for category in data["categories"]:
        cat_key, sub_key = category["key"], f"{category['key']}-modes"
        texts = {"definition": category.get("definition", ""), "source": category.get("source", "")}
        specs.append(CodeSpec(key=cat_key, level="category", name=category["name"], **texts))
        specs.append(CodeSpec(key=sub_key, level="subcategory", name=category["name"], parent_key=cat_key,
                              definition=f"MAST has no subcategories: this one holds every mode of {category['name']}.",
                              source=texts["source"]))  # fmt: skip
        for mode in category["modes"]:
            unknown = set(mode) - {"key", "name", *TEXT_FIELDS}
            if unknown:
                raise TreeError(f"{mode.get('name')}: unknown field(s) {', '.join(sorted(unknown))} in {path.name}")
            fields = {name: mode.get(name, "") for name in TEXT_FIELDS}
            specs.append(CodeSpec(key=mode["key"], level="mode", name=mode["name"], parent_key=sub_key, **fields))
    return data, specs


# The codebooks Parallax ships (`load_codebook --preset NAME`): the study's own and MAST.
PRESETS = {"study": default_codebook_specs, "mast": mast_codebook_specs}


@transaction.atomic
def codebook_load_preset(*, preset: str, freeze: bool = True) -> Codebook:
    """A shipped codebook (PRESETS), frozen; idempotent (returns the stored one if present). Presets live
    side by side: each is its own codebook name, and a study pins whichever version it codes with."""
    if preset not in PRESETS:
        raise TreeError(f"unknown preset {preset!r}; one of {', '.join(PRESETS)}")
    data, specs = PRESETS[preset]()
    existing = Codebook.objects.filter(name=data["name"], version=data["version"]).first()
    if existing is not None:
        return existing
    codebook = codebook_create_from_specs(
        name=data["name"], version=data["version"], specs=specs, description=data.get("description", "")
    )
    if freeze:
        codebook_freeze(codebook=codebook)
    return codebook


def codebook_load_default(*, freeze: bool = True) -> Codebook:
    """The study's codebook, frozen; idempotent (returns the stored one if present)."""
    return codebook_load_preset(preset="study", freeze=freeze)


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
            **{name: getattr(c, name) for name in TEXT_FIELDS},
        )
        for c in codebook.codes.select_related("parent").order_by("position")
    ]


@transaction.atomic
def codebook_new_version(
    *, codebook: Codebook, change_log: str = "", user=None, specs: list[CodeSpec] | None = None
) -> Codebook:
    """A new draft version derived from `codebook` (same keys unless `specs` says otherwise). Refused while a draft
    of that codebook is open (OpenDraftError names it): two drafts would both claim to be the next version."""
    draft = (
        Codebook.objects.select_for_update()
        .filter(name=codebook.name, status=Codebook.Status.DRAFT)
        .order_by("-version")
        .first()
    )
    if draft is not None:
        raise OpenDraftError(draft)
    _checked(change_log, column="change_log", model=Codebook)
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
    allowed = {"name", *TEXT_FIELDS}
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"cannot change {', '.join(sorted(unknown))}")
    for key, value in fields.items():
        _checked(value, column=key)
    before = {key: getattr(code, key) for key in fields}
    for key, value in fields.items():
        setattr(code, key, value)
    code.save(update_fields=list(fields))
    record("code.update", f"{code.key} in {code.codebook} edited ({', '.join(sorted(fields))})",
           codebook_id=code.codebook_id, code=code.key, before=before, after=dict(fields))  # fmt: skip
    return code


# -- Draft editor: create, rename, merge, split ------------------------------------------
#
# Each operation works on one draft (a frozen codebook is refused before anything is read), checks
# everything before it writes, renumbers the codebook in tree order, notes itself in the draft's
# change log and in the activity log. Codes are found by key; an error names the key.


def _require_draft(codebook: Codebook) -> None:
    """Lock the draft's row for the operation: two edits of one draft run one after the other, and
    a freeze waits for the edit in progress (and the edit sees a freeze that came first)."""
    status = Codebook.objects.select_for_update().filter(pk=codebook.pk).values_list("status", flat=True).first()
    if status == Codebook.Status.FROZEN:
        raise FrozenCodebookError(f"{codebook} is frozen; make a new version to change it")


def _checked(value: str, *, column: str, model=Code, name: str | None = None) -> str:
    """`value` if the field may hold it (common.text: no NUL, no lone surrogate, within the model field's
    max_length); else TreeError naming the form's column."""
    try:
        return model_text(model, name or column, value, field=column)
    except TextError as exc:
        raise TreeError(exc.problem, column=column) from exc


def _code(codebook: Codebook, key: str, *, field: str = "key") -> Code:
    _checked(key, column=field, name="key")
    code = codebook.codes.filter(key=key).select_related("parent").first()
    if code is None:
        raise TreeError(f"{key!r} is not a key in {codebook.name} v{codebook.version}", column=field)
    return code


def _new_key(codebook: Codebook, key: str, name: str, *, taken: set[str] | None = None, field: str = "key") -> str:
    _checked(name, column="name")
    _checked(key, column=field, name="key")
    key = key.strip() or slugify_key(name)
    if not name.strip():
        raise TreeError("name is empty", column="name")
    if not key or not SLUG.match(key):
        raise TreeError(f"key {key!r} must be lowercase letters, digits and hyphens", column=field)
    if codebook.codes.filter(key=key).exists() or key in (taken or set()):
        raise TreeError(f"key {key!r} is already used in this codebook", column=field)
    return key


def _renumber(codebook: Codebook) -> None:
    """Positions in tree order (each category, its subcategories, each followed by its modes),
    keeping the current order among siblings."""
    codes = list(codebook.codes.order_by("position", "pk"))
    children: dict[int | None, list[Code]] = {}
    for code in codes:
        children.setdefault(code.parent_id, []).append(code)
    ordered: list[Code] = []

    def walk(parent_id: int | None) -> None:
        for child in children.get(parent_id, []):
            ordered.append(child)
            walk(child.pk)

    walk(None)
    changed = []
    for position, code in enumerate(ordered):
        if code.position != position:
            code.position = position
            changed.append(code)
    Code.objects.bulk_update(changed, ["position"])


def _logged(codebook: Codebook, action: str, line: str, user, **detail) -> None:
    codebook.change_log = f"{codebook.change_log}\n{line}".strip()
    codebook.save(update_fields=["change_log"])
    record(action, f"{codebook}: {line}", actor=user, codebook_id=codebook.pk, **detail)


def _repoint(source: Code, target: Code) -> None:
    """Whatever pointed at `source` (a promoted open code, …) points at `target`: nothing that
    referred to a merged or split code is left dangling or silently cleared."""
    for rel in Code._meta.related_objects:
        if rel.one_to_many and rel.related_model is not Code:
            rel.related_model._base_manager.filter(**{rel.field.name: source}).update(**{rel.field.name: target})


@transaction.atomic
def code_create(
    *, codebook: Codebook, level: str, name: str, parent_key: str = "", key: str = "", user=None, **texts: str
) -> Code:
    """A new code at the end of its parent's children (a category: at the end)."""
    _require_draft(codebook)
    if level not in LEVELS:
        raise TreeError(f"level must be one of {', '.join(LEVELS)}, got {level!r}", column="level")
    unknown = set(texts) - set(TEXT_FIELDS)
    if unknown:
        raise TreeError(f"unknown field(s) {', '.join(sorted(unknown))}")
    for column, value in texts.items():
        _checked(value, column=column)
    key = _new_key(codebook, key, name)
    parent = None
    expected = PARENT_LEVEL[level]
    if expected is None:
        if parent_key:
            raise TreeError("a category has no parent", column="parent_key")
    else:
        if not parent_key:
            raise TreeError(f"a {level} needs a parent {expected}", column="parent_key")
        parent = _code(codebook, parent_key, field="parent_key")
        if parent.level != expected:
            raise TreeError(
                f"the parent of a {level} must be a {expected}, {parent_key!r} is a {parent.level}",
                column="parent_key",
            )
    last = codebook.codes.order_by("-position").values_list("position", flat=True).first()
    code = Code.objects.create(
        codebook=codebook, level=level, parent=parent, key=key, name=name.strip(),
        position=(last or 0) + 1, **texts,
    )  # fmt: skip
    _renumber(codebook)
    where = f" under {parent_key}" if parent_key else ""
    _logged(codebook, "code.create", f"added {level} {key}{where}", user, code=key)
    return code


@transaction.atomic
def code_rename(*, code: Code, name: str, key: str = "", user=None) -> Code:
    """A new name, and a new key if given (a draft is never pinned by a study: no label refers to
    its keys yet)."""
    codebook = code.codebook
    _require_draft(codebook)
    _checked(name, column="name")
    if not name.strip():
        raise TreeError("name is empty", column="name")
    old_key, old_name = code.key, code.name
    if key and key != code.key:
        code.key = _new_key(codebook, key, name)
    code.name = name.strip()
    code.save(update_fields=["name", "key"])
    change = f"renamed {old_key} ({old_name}) to {code.key} ({code.name})"
    _logged(codebook, "code.rename", change, user, before=[old_key, old_name], after=[code.key, code.name])
    return code


@transaction.atomic
def codes_merge(*, codebook: Codebook, keys: list[str], into: str, name: str = "", user=None) -> Code:
    """Merge codes of one level into one: `into` is one of `keys` (it stays, renamed to `name` if
    given) or a new key (created under the first code's parent). The children of the merged codes
    move under it; what pointed at them points at it."""
    _require_draft(codebook)
    for text in (*keys, into):
        _checked(text, column="keys" if text in keys else "into", name="key")
    _checked(name, column="name")
    keys = list(dict.fromkeys(k.strip() for k in keys if k.strip()))
    if len(keys) < 2:
        raise TreeError("name at least two codes to merge", column="keys")
    codes = [_code(codebook, key, field="keys") for key in keys]
    levels = {c.level for c in codes}
    if len(levels) > 1:
        raise TreeError(f"codes of different levels cannot merge: {', '.join(f'{c.key} ({c.level})' for c in codes)}")
    into = into.strip()
    if not into:
        raise TreeError("name the code they merge into", column="into")
    target = next((c for c in codes if c.key == into), None)
    if target is None:
        if not name.strip():
            raise TreeError(f"{into!r} is a new code: give it a name", column="name")
        first = codes[0]
        target = Code.objects.create(
            codebook=codebook, level=first.level, parent=first.parent, key=_new_key(codebook, into, name, field="into"),
            name=name.strip(), position=first.position,
            **{f: getattr(first, f) for f in TEXT_FIELDS},
        )  # fmt: skip
    elif name.strip():
        target.name = name.strip()
        target.save(update_fields=["name"])
    for code in codes:
        if code.pk == target.pk:
            continue
        code.children.all().update(parent=target)
        _repoint(code, target)
        code.delete()
    _renumber(codebook)
    merged = [k for k in keys if k != target.key]
    _logged(codebook, "code.merge", f"merged {', '.join(merged)} into {target.key}", user, keys=keys, into=target.key)
    return target


@transaction.atomic
def code_split(
    *, code: Code, parts: list[tuple[str, str]], children: dict[str, str] | None = None, user=None
) -> list[Code]:
    """Split a code into several of its level under its parent: `parts` are (key, name) pairs (a
    part may keep the code's own key: it then stays, renamed); every child of a category or
    subcategory goes to one part (`children`: child key → part key). What pointed at a removed code
    points at the first part."""
    codebook = code.codebook
    _require_draft(codebook)
    children = dict(children or {})
    if len(parts) < 2:
        raise TreeError(f"split {code.key!r} into at least two codes", column="parts")
    taken: set[str] = set()
    made: list[tuple[str, str, bool]] = []  # key, name, is the code itself
    for key, name in parts:
        _checked(key, column="parts", name="key")
        _checked(name, column="parts", name="name")
        key, name = key.strip(), name.strip()
        if key == code.key:
            if not name:
                raise TreeError("name is empty", column="name")
            made.append((key, name, True))
        else:
            key = _new_key(codebook, key, name, taken=taken, field="parts")
            made.append((key, name, False))
        taken.add(key)
    part_keys = [key for key, _, _ in made]
    existing_children = {c.key: c for c in code.children.all()}
    for child_key, part_key in children.items():
        if child_key not in existing_children:
            raise TreeError(f"{child_key!r} is not a child of {code.key!r}", column="children")
        if part_key not in part_keys:
            raise TreeError(f"{child_key!r} goes to {part_key!r}, which is not one of the parts", column="children")
    unassigned = sorted(set(existing_children) - set(children))
    if unassigned:
        raise TreeError(
            f"say which part each child of {code.key!r} goes to: {', '.join(unassigned)}", column="children"
        )
    created: dict[str, Code] = {}
    for key, name, itself in made:
        if itself:
            code.name = name
            code.save(update_fields=["name"])
            created[key] = code
        else:
            created[key] = Code.objects.create(
                codebook=codebook,
                level=code.level,
                parent=code.parent,
                key=key,
                name=name,
                position=code.position,
                **{f: getattr(code, f) for f in ("definition", "source")},
            )  # fmt: skip (same position, later pk: the parts follow the code, in the order given)
    for child_key, part_key in children.items():
        child = existing_children[child_key]
        child.parent = created[part_key]
        child.save(update_fields=["parent"])
    if code.key not in created:
        _repoint(code, created[part_keys[0]])
        code.delete()
    _renumber(codebook)
    _logged(codebook, "code.split", f"split {code.key} into {', '.join(part_keys)}", user, key=code.key,
            parts=part_keys, children=children)  # fmt: skip
    return [created[key] for key in part_keys]


@transaction.atomic
def code_delete(*, code: Code, user=None) -> None:
    """Remove a code of a draft that has no children (move or merge them first)."""
    codebook = code.codebook
    _require_draft(codebook)
    if code.children.exists():
        raise TreeError(f"{code.key!r} still has {code.children.count()} code(s) under it: merge or move them first")
    key = code.key
    code.delete()
    _renumber(codebook)
    _logged(codebook, "code.delete", f"removed {key}", user, code=key)


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
                    **{name: getattr(code, name) for name in TEXT_FIELDS},
                    "codebook": codebook.name,
                    "version": codebook.version,
                }.items()
            }
        )
    return out.getvalue()


def codebook_import_csv(*, text: str, name: str | None = None, user=None) -> Codebook:
    """Create a draft codebook from CSV (the export's shape). Any bad row rejects the whole file."""
    if name is not None:
        _checked(name, column="name", model=Codebook)
    try:
        text_check(text, field="file", max_length=None)
    except TextError as exc:
        raise TreeError(f"the file {exc.problem}") from exc
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("key", "level", "parent_key", "name") if c not in (reader.fieldnames or [])]
    if missing:
        raise TreeError(f"missing column(s): {', '.join(missing)}", row=1)
    if "example" in (reader.fieldnames or []) and "positive_example" in (reader.fieldnames or []):
        raise TreeError("both 'example' (the old column) and 'positive_example': keep one", row=1, column="example")
    specs: list[CodeSpec] = []
    names, versions = set(), set()
    for row_no, row in enumerate(reader, start=2):
        if "example" in row:  # a file exported before the example was split: it is the positive one
            row["positive_example"] = row.pop("example")
        specs.append(
            CodeSpec(
                key=spreadsheet_unsafe(row.get("key")).strip(),
                level=spreadsheet_unsafe(row.get("level")).strip(),
                name=spreadsheet_unsafe(row.get("name")).strip(),
                parent_key=spreadsheet_unsafe(row.get("parent_key")).strip(),
                row=row_no,
                **{name: spreadsheet_unsafe(row.get(name)) for name in TEXT_FIELDS},
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

from __future__ import annotations

from dataclasses import dataclass, field

from .models import Code, Codebook


@dataclass
class Node:
    code: Code
    children: list[Node] = field(default_factory=list)


def codebook_tree(*, codebook: Codebook) -> list[Node]:
    """Categories with nested subcategories and modes, in codebook order, in one query."""
    nodes = {c.pk: Node(c) for c in codebook.codes.order_by("position")}
    roots: list[Node] = []
    for node in nodes.values():
        if node.code.parent_id is None:
            roots.append(node)
        else:
            parent = nodes[node.code.parent_id]
            node.code.parent = parent.code  # cache the relation: templates walk up without queries
            parent.children.append(node)
    return roots

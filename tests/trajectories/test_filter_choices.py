"""The run list's dropdowns list each value once, however many tasks share it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import simple_run, write_jsonl
from trajectories.selectors import filter_choices
from trajectories.services import import_paths

pytestmark = pytest.mark.django_db


@pytest.fixture
def eight_easy_tasks(tmp_path):
    """Eight easy tasks over two benchmarks and two agents, two hard, one of unknown difficulty."""
    for i in range(11):
        lines = simple_run(f"task-{i}", agent="Codex" if i % 2 else "Kimi Code", n_sub=1)
        lines[0]["task"].update(benchmark="LoopsBench" if i < 5 else "NL2RepoBench")
        lines[0]["task"]["difficulty"] = "easy" if i < 8 else ("hard" if i < 10 else "")
        write_jsonl(tmp_path / f"{i}.jsonl", lines)
    import_paths(paths=[tmp_path])


def options(body: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}">(.*?)</select>', body, re.S).group(1)
    return re.findall(r"<option[^>]*>([^<]*)</option>", select)


def test_each_difficulty_is_listed_once_in_its_order(eight_easy_tasks):
    assert filter_choices() == {
        "benchmarks": ["LoopsBench", "NL2RepoBench"],
        "agents": ["Codex", "Kimi Code"],
        "difficulties": ["easy", "hard"],  # easy → medium → hard; the unknown one is not a choice
    }


def test_the_run_list_dropdowns_show_each_value_once(browser_client, eight_easy_tasks):
    body = browser_client.get(reverse("trajectories:run_list")).content.decode()
    assert options(body, "difficulty") == ["all", "easy", "hard"]
    assert options(body, "benchmark") == ["all", "LoopsBench", "NL2RepoBench"]
    assert options(body, "agent") == ["all", "Codex", "Kimi Code"]


def test_an_unknown_difficulty_filters_to_nothing(browser_client, eight_easy_tasks):
    body = browser_client.get(reverse("trajectories:run_list"), {"difficulty": "impossible"}).content.decode()
    assert "0 runs" in body and options(body, "difficulty") == ["all", "easy", "hard"]

"""The suite's file order (tests/conftest.py): the longest files first, so no worker ends on one alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from test_shared_synthesis import ROOT, suite_conftest


def test_every_listed_long_file_exists() -> None:
    missing = [path for path in suite_conftest().LONGEST_FILES if not (ROOT / path).is_file()]
    assert missing == [], f"tests/conftest.py LONGEST_FILES names files that are gone: {missing}"


def test_long_files_go_first_and_each_file_stays_together_in_its_order() -> None:
    conftest = suite_conftest()
    longest = max(conftest.LONGEST_FILES, key=conftest.LONGEST_FILES.get)

    def item(nodeid: str, slow: bool = False) -> Any:
        return SimpleNamespace(
            nodeid=nodeid, get_closest_marker=lambda name: (slow and name == "slow") or None
        )

    items = [
        item("tests/a.py::one"),
        item("tests/b.py::one", slow=True),
        item(f"{longest}::x"),
        item("tests/a.py::two"),
        item(f"{longest}::y"),
        item("tests/c.py::one"),
    ]
    conftest.pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == [
        f"{longest}::x",
        f"{longest}::y",
        "tests/b.py::one",  # a slow test outweighs none
        "tests/a.py::one",
        "tests/a.py::two",  # a file's tests together, in the order they came
        "tests/c.py::one",
    ]

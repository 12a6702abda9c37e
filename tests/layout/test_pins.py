"""One version per package in the main environment: every pin of the requirements files scripts/bootstrap.sh
installs into .venv (with `-c constraints.txt`) is constraints.txt's own, so a pin added to one file alone (the
local world's flask, say) cannot ask for another version than the tree was resolved with. The serving and
checkov environments are separate virtual environments with their own pins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAIN_ENVIRONMENT = (
    "requirements.txt",
    "requirements-local.txt",
    "requirements-dev.txt",
    "training_code/requirements.txt",
)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?==([^\s;#]+)")


def pins(path: Path) -> dict[str, str]:
    """name (normalized as pip does) -> version, for each `name==version` line."""
    found = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line.strip())
        if match:
            found[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return found


@pytest.mark.parametrize("requirements", MAIN_ENVIRONMENT)
def test_every_pin_is_the_constraints_one(requirements: str) -> None:
    constraints = pins(ROOT / "constraints.txt")
    own = pins(ROOT / requirements)
    assert own, f"{requirements} pins nothing"
    assert {
        name: (version, constraints.get(name))
        for name, version in own.items()
        if constraints.get(name) != version
    } == {}


def test_the_local_world_server_is_pinned() -> None:
    """moto's server (`hfpipe local up`) needs flask and flask-cors, which moto's extras here do not bring."""
    local = pins(ROOT / "requirements-local.txt")
    assert {"flask", "flask-cors"} <= set(local)
    constraints = pins(ROOT / "constraints.txt")
    for dependency in ("werkzeug", "jinja2", "markupsafe", "click", "itsdangerous", "blinker"):
        assert dependency in constraints, dependency

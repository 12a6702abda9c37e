"""`hfpipe endpoints` on an environment whose shared base is up: a base with no adapter on it bills for
nothing, said with the command that retires it; the last line names that command for the base (`endpoints
delete` refuses the base)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from hfpipe.cli.deploy.endpoints import _shared_base_lines


def lines(found: list[SimpleNamespace]) -> tuple[str, list[str]]:
    out = io.StringIO()
    added = _shared_base_lines(Console(file=out, width=300), found, "dev")
    return added, out.getvalue().strip().splitlines()


def test_an_idle_shared_base_is_said_to_bill_for_nothing() -> None:
    base = SimpleNamespace(name="hfpipe-dev-shared-base", price_per_hour_usd=2.03, adapters=())
    added, printed = lines([base])
    assert printed == [
        "hfpipe-dev-shared-base: no adapter on it: the shared base bills (2.03 USD/h) for nothing; retire it: "
        "`hfpipe deploy --env dev --retire-base`"
    ]
    assert added == " (the shared base hfpipe-dev-shared-base: `hfpipe deploy --env dev --retire-base`)"
    # Its own calls (the base's share) are no adapter: still idle.
    base.adapters = (SimpleNamespace(is_base=True),)
    assert lines([base])[1] == printed


def test_a_base_with_adapters_or_no_base_says_nothing_more() -> None:
    base = SimpleNamespace(
        name="hfpipe-dev-shared-base", price_per_hour_usd=2.03, adapters=(SimpleNamespace(is_base=False),)
    )
    assert lines([base]) == (
        " (the shared base hfpipe-dev-shared-base: `hfpipe deploy --env dev --retire-base`)",
        [],
    )
    other = SimpleNamespace(name="hfpipe-dev-summaries", price_per_hour_usd=1.0, adapters=())
    assert lines([other]) == ("", [])

"""CI's check of the README's first command: the report it wrote (read back by `hfpipe report --local --json`,
on stdin) ended SUCCEEDED with the smoke test's answer. Exit status 0 when it did, 1 with one line when not."""

import json
import sys


def problem(report: dict) -> str | None:
    """None when the run the report describes ended SUCCEEDED with an answer, else what it lacks."""
    smoke = report.get("smoke_test") or {}
    if report.get("execution_status") != "SUCCEEDED":
        return f"ended {report.get('execution_status')!r}, not 'SUCCEEDED'"
    if not smoke.get("ok") or not smoke.get("response"):
        return f"its smoke test gave no answer: {smoke!r}"
    return None


def main() -> int:
    report = json.load(sys.stdin)
    smoke = report.get("smoke_test") or {}
    print(
        f"ci: ./scripts/local.sh: {report.get('execution_status')}, smoke test answer: {smoke.get('response')!r}"
    )
    found = problem(report)
    if found:
        print(f"ci: the README's first command {found}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

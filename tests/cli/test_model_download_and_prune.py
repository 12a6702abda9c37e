"""Getting the model out and tidying up: `hfpipe models download` against the real state machine on moto (the
version the Register step made, its model.tar.gz unpacked safely, its metadata beside it), and `hfpipe local
prune` on folders in tmp_path (only local runs go, the newest N stay)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from cli_moto import Deployed
from cli_run import run

from hfpipe.core.names import default_execution_name
from hfpipe.local import outputs


def _archive(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


@pytest.fixture
def registered(deployed: Deployed) -> tuple[Deployed, str]:
    """One succeeded tiny-lora run, so version tiny-lora/1; returns its ModelDataUrl."""
    deployed.start("dl-1")
    version = deployed.sagemaker.list_model_packages(ModelPackageGroupName="hfpipe-dev-tiny-lora")[
        "ModelPackageSummaryList"
    ][0]
    desc = deployed.sagemaker.describe_model_package(ModelPackageName=version["ModelPackageArn"])
    return deployed, desc["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]


def _put(deployed: Deployed, url: str, body: bytes) -> None:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    deployed.s3.put_object(Bucket=bucket, Key=key, Body=body)


def test_download_unpacks_the_version_with_its_metadata(
    registered: tuple[Deployed, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed, url = registered
    # an absolute member name lands inside the folder, as tarfile's data filter strips the leading slash
    members = {"config.json": b"{}", "code/inference.py": b"def model_fn(d): ...\n", "/hfpipe-abs.txt": b"x"}
    _put(deployed, url, _archive(members))
    dest = tmp_path / "model"
    code, out, err = run(capsys, "models", "download", "tiny-lora/1", "--env", "dev", "--to", str(dest))
    assert (code, err) == (0, ""), err
    assert (dest / "config.json").read_bytes() == b"{}"
    assert (dest / "code" / "inference.py").is_file() and (dest / "hfpipe-abs.txt").is_file()
    assert not Path("/hfpipe-abs.txt").exists()
    meta = json.loads((dest / "hfpipe-version.json").read_text())
    assert (meta["ref"], meta["env"], meta["execution"], meta["model_data_url"]) == (
        "tiny-lora/1",
        "dev",
        "dl-1",
        url,
    )
    assert meta["metrics"] == {"train_loss": 1.25, "eval_loss": 1.5} and meta["image"]
    assert f"tiny-lora/1 (PendingManualApproval): {url}" in out and f"unpacked into {dest}, 4 files" in out


@pytest.mark.parametrize(
    ("members", "links", "fragment"),
    [
        ({"../escaped.txt": b"x"}, None, "outside the destination"),
        ({"ok.txt": b"x"}, {"link": "/etc/passwd"}, "absolute"),
        ({"ok.txt": b"x"}, {"sub/link": "../../escaped.txt"}, "outside the destination"),
        ({"hfpipe-version.json": b"{}"}, None, "holds a file named hfpipe-version.json"),
    ],
    ids=["dotdot", "absolute-link", "link-out", "metadata-name"],
)
def test_download_refuses_an_archive_that_leaves_its_folder(
    registered: tuple[Deployed, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    members: dict[str, bytes],
    links: dict[str, str] | None,
    fragment: str,
) -> None:
    deployed, url = registered
    _put(deployed, url, _archive(members, links))
    dest = tmp_path / "deep" / "model"
    code, _, err = run(capsys, "models", "download", "tiny-lora/1", "--env", "dev", "--to", str(dest))
    assert code == 1 and err.count("\n") == 1 and fragment in err, err
    assert not dest.exists() or not any(dest.iterdir())  # nothing unpacked, not even the good members
    assert not (tmp_path / "deep" / "escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()


def test_download_never_overwrites(
    registered: tuple[Deployed, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    deployed, url = registered
    _put(deployed, url, _archive({"config.json": b"{}"}))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep")
    code, _, err = run(capsys, "models", "download", "tiny-lora/1", "--env", "dev", "--to", str(taken))
    assert (code, err) == (
        1,
        f"error: --to {str(taken)!r} exists and is not an empty folder; accepted: a new or empty folder "
        "(nothing there is overwritten)\n",
    )
    assert sorted(p.name for p in taken.iterdir()) == ["mine.txt"]
    monkeypatch.chdir(tmp_path)  # the default folder: ./RECIPE-N
    assert run(capsys, "models", "download", "tiny-lora/1", "--env", "dev")[0] == 0
    assert (tmp_path / "tiny-lora-1" / "config.json").is_file()
    code, _, err = run(capsys, "models", "download", "tiny-lora/7", "--env", "dev")
    assert code == 1 and "no version 7 in model package group hfpipe-dev-tiny-lora" in err
    code, _, err = run(capsys, "models", "--env", "dev", "--to", str(taken))
    assert code == 2 and err.startswith("usage: hfpipe models list") and "arguments: --to" in err, err


# --- local prune --------------------------------------------------------------------------------------


def _local_run(out: Path, name: str, age_s: float, *, finished: bool = True) -> Path:
    folder = out / name
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "data.json").write_text("[]")
    (folder / outputs.TRAINING_LOG).write_text("log\n")
    if finished:
        (folder / outputs.REPORT).write_text("{}")
    for marker in outputs.RUN_MARKERS:
        if (folder / marker).exists():
            os.utime(folder / marker, (1_700_000_000 - age_s, 1_700_000_000 - age_s))
    return folder


def test_prune_keeps_the_newest_runs_and_nothing_else_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "local"
    names = [f"tiny-qa-2026120{i}-000000" for i in range(1, 5)]  # oldest first
    for age, name in zip((400, 300, 200, 100), names, strict=True):
        _local_run(out, name, age)
    (out / ".cache").mkdir()
    (out / ".cache" / "training.log").write_text("not a run")
    (out / "notes").mkdir()  # a folder of the user's, even with a file of a run's name
    (out / "notes" / "report.json").write_text("mine")
    elsewhere = _local_run(tmp_path, "tiny-qa-20250101-000000", 900)
    (out / "tiny-qa-20250101-000000").symlink_to(elsewhere)  # a link to a run is not a run of this folder
    (out / "tiny-qa-20261201-999999.txt").write_text("a file")
    code, stdout, err = run(capsys, "local", "prune", "--keep", "2", "--out", str(out))
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*names[2:], ".cache", "notes", "tiny-qa-20250101-000000", "tiny-qa-20261201-999999.txt"]
    )
    assert elsewhere.is_dir() and (elsewhere / outputs.REPORT).is_file()
    assert stdout.splitlines()[:2] == [f"removed {names[0]} (0.0 MB)", f"removed {names[1]} (0.0 MB)"]
    assert f"{out}: removed 2 local runs" in stdout and "2 left (--keep 2)" in stdout


def test_prune_spares_a_run_that_may_still_be_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "local"
    live = out / default_execution_name("tiny-qa")
    live.mkdir(parents=True)
    (live / outputs.TRAINING_LOG).write_text("step 1\n")  # written now, no report yet
    code, stdout, _ = run(capsys, "local", "prune", "--keep", "0", "--out", str(out))
    assert code == 0 and live.is_dir()
    assert f"kept {live.name}: it has no report" in stdout


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ("local", "prune", "--keep", "-1"),
            "--keep -1 is not accepted; accepted: a whole number of runs, 0 or more",
        ),
    ],
)
def test_prune_options(argv: tuple[str, ...], fragment: str, tmp_path: Path, capsys: Any) -> None:
    code, _, err = run(capsys, *argv, "--out", str(tmp_path))
    assert code == 2 and fragment in err and err.count("\n") == 1, err  # usage errors (docs/cli.md)


def test_a_local_runs_folder_name_is_what_local_mode_names_it() -> None:
    assert outputs.RUN_NAME.fullmatch(default_execution_name("bloomz-7b1-lora-samsum"))
    assert outputs.RUN_NAME.fullmatch(default_execution_name("x" * 63))


def test_prune_counts_every_run_folder_also_one_a_run_left_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run cut off before it wrote anything left an empty folder, which prune neither counted nor removed:
    "5 left (--keep 5)" while 8 remained."""
    out = tmp_path / "local"
    written = [f"tiny-qa-2026120{i}-000000" for i in range(1, 6)]
    for age, name in zip((500, 400, 300, 200, 100), written, strict=True):
        _local_run(out, name, age)
    empty = [f"tiny-lora-2025010{i}-000000" for i in range(1, 4)]
    for name in empty:
        (out / name).mkdir()
        os.utime(out / name, (1_600_000_000, 1_600_000_000))  # long ago: not a run starting now
    code, stdout, err = run(capsys, "local", "prune", "--keep", "5", "--out", str(out))
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out.iterdir()) == sorted(written)
    assert f"{out}: removed 3 local runs" in stdout and "5 left (--keep 5)" in stdout

"""sourcedir.tar.gz: deterministic bytes, exclusions, and a CDK asset hash that follows the contents."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import aws_cdk as cdk
import pytest

from stacks.constructs.source_asset import ARCHIVE_NAME, SourcedirAsset, TarballBundler, tarball_bytes


def make_source(root: Path) -> Path:
    (root / "utils").mkdir(parents=True)
    (root / "run_clm.py").write_text("print('train')\n")
    (root / "utils" / "data.py").write_text("X = 1\n")
    (root / "requirements.txt").write_text("peft==0.17.1\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "run_clm.cpython-311.pyc").write_bytes(b"\x00junk")
    (root / "utils" / "stale.pyc").write_bytes(b"\x00junk")
    return root


def members(archive: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return tar.getmembers()


def test_archive_is_sorted_normalized_and_excludes_bytecode(tmp_path):
    archive = tarball_bytes(make_source(tmp_path / "src"))
    infos = members(archive)
    assert [m.name for m in infos] == ["requirements.txt", "run_clm.py", "utils/data.py"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in infos} == {(0, 0, 0, "", "", 0o644)}
    # gzip header: bytes 4-8 are the mtime, and FLG (byte 3) has no FNAME bit.
    assert archive[4:8] == b"\x00\x00\x00\x00"
    assert archive[3] & 0x08 == 0
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert tar.extractfile("utils/data.py").read() == b"X = 1\n"


def test_same_files_give_same_bytes_whatever_times_permissions_and_order(tmp_path):
    first = make_source(tmp_path / "a")
    second = tmp_path / "b"
    second.mkdir()
    # Created in another order, with other times and permissions, in another folder.
    (second / "requirements.txt").write_text("peft==0.17.1\n")
    (second / "utils").mkdir()
    (second / "utils" / "data.py").write_text("X = 1\n")
    (second / "run_clm.py").write_text("print('train')\n")
    os.chmod(second / "run_clm.py", 0o600)  # another umask: the same file as git records it
    os.utime(second / "run_clm.py", (1_700_000_000, 1_700_000_000))
    assert tarball_bytes(first) == tarball_bytes(second)
    assert tarball_bytes(first) == tarball_bytes(first)
    assert gzip.decompress(tarball_bytes(first))  # a valid gzip stream
    # Whether a file is executable is kept, as git records it and the SDK's archive keeps it.
    os.chmod(second / "run_clm.py", 0o755)
    assert tarball_bytes(first) != tarball_bytes(second)
    assert {m.name: m.mode for m in members(tarball_bytes(second))}["run_clm.py"] == 0o755


def test_edited_file_gives_new_bytes(tmp_path):
    source = make_source(tmp_path / "src")
    before = tarball_bytes(source)
    (source / "utils" / "data.py").write_text("X = 2\n")
    assert tarball_bytes(source) != before


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"sourcedir: '.*nowhere' is not a directory"):
        tarball_bytes(tmp_path / "nowhere")


def test_bundler_writes_one_archive(tmp_path):
    source = make_source(tmp_path / "src")
    out = tmp_path / "out"
    out.mkdir()
    assert TarballBundler(source).try_bundle(str(out)) is True
    assert [p.name for p in out.iterdir()] == [ARCHIVE_NAME]
    assert (out / ARCHIVE_NAME).read_bytes() == tarball_bytes(source)


def asset_hash(source: Path, outdir: Path) -> tuple[str, str, bytes]:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Stack", env=cdk.Environment(region="eu-west-1"))
    asset = SourcedirAsset(stack, "Sourcedir", source=source)
    staged = next(outdir.glob(f"asset.{asset.asset.asset_hash}*"))
    return asset.asset.asset_hash, asset.asset.s3_object_key, staged.read_bytes()


def test_cdk_asset_hash_follows_the_archive_bytes(tmp_path):
    source = make_source(tmp_path / "src")
    first_hash, key, staged = asset_hash(source, tmp_path / "out1")
    assert key == f"{first_hash}.gz"
    assert staged == tarball_bytes(source)  # bundled locally: no Docker
    (source / "__pycache__" / "new.pyc").write_bytes(b"ignored")
    assert asset_hash(source, tmp_path / "out2")[0] == first_hash
    (source / "run_clm.py").write_text("print('train more')\n")
    assert asset_hash(source, tmp_path / "out3")[0] != first_hash

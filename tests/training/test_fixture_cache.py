"""A tiny fixture model built into a cache folder is built once and copied after: the copy is the files its
build wrote, the same weights and config as any build (seeded); the trained tokenizer's files are not
byte-reproducible from build to build (the tokenizers library orders ties by its own hashing), so a cache
makes the runs that share it more alike, never less. An entry is never served for other library versions."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

import hfpipe.fixtures as fixtures
from hfpipe.local.training import substitute


def _same_files(a: Path, b: Path, only: tuple[str, ...] = ()) -> bool:
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    return all(filecmp.cmp(a / n, b / n, shallow=False) for n in names if not only or n in only)


def test_a_cached_tiny_model_is_built_once_and_is_what_a_build_writes(tmp_path, monkeypatch):
    builds = []
    real = fixtures._named

    def counting(target, what):
        builder = real(target, what)
        return lambda dest, **options: builds.append(dest) or builder(dest, **options)

    monkeypatch.setattr(fixtures, "_named", counting)
    cache = tmp_path / "cache"
    first = fixtures.build_tiny_model("distilbert", tmp_path / "first", cache)
    second = fixtures.build_tiny_model("distilbert", tmp_path / "second", cache)
    plain = fixtures.build_tiny_model("distilbert", tmp_path / "plain")
    assert len(builds) == 2  # the cached entry once, the uncached build once; the second copy built nothing
    assert _same_files(first, second)
    assert _same_files(first, plain, only=("config.json", "model.safetensors"))
    assert [p.name for p in cache.iterdir()] == [
        f"tiny-model-distilbert-{fixtures._fingerprint('distilbert')}"
    ]


def test_the_entry_changes_with_the_libraries_that_write_it(monkeypatch):
    before = fixtures._fingerprint("distilbert")
    monkeypatch.setattr(fixtures, "version", lambda package: "0.0.0-other")
    assert fixtures._fingerprint("distilbert") != before


@pytest.mark.parametrize("devices, asks_torch", [((), False), (("nvidia0",), True)])
def test_without_a_gpu_device_file_torch_is_not_asked(devices, asks_torch, monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(substitute.Path, "glob", lambda self, pattern: iter([self / d for d in devices]))
    monkeypatch.setattr(substitute.Path, "exists", lambda self: False)
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append(True) or False)
    assert substitute.has_gpu() is False
    assert bool(asked) is asks_torch

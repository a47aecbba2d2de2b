"""croupier.files.write_atomic: the data and the directory entry are on disk in order."""

from __future__ import annotations

import os

import pytest

from croupier import files


def test_write_atomic_fsyncs_data_then_renames_then_fsyncs_the_folder(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:  # noqa: ANN001
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "fsync", fsync)
    monkeypatch.setattr(files.os, "replace", replace)
    target = tmp_path / "sub" / "ratings.json"
    files.write_atomic(target, '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert events == [
        ("fsync", str(tmp_path / "sub" / "ratings.json.tmp")),
        ("replace", str(target)),
        ("fsync", str(tmp_path / "sub")),
    ]
    files.write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    files.write_atomic(target, lambda f: f.write(b"by writer"), tmp=tmp_path / "x.tmp")
    assert target.read_bytes() == b"by writer"
    assert sorted(p.name for p in target.parent.iterdir()) == ["ratings.json"]


def test_a_failed_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "f.json"
    files.write_atomic(target, "old")

    def boom(f) -> None:  # noqa: ANN001
        f.write(b"half")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        files.write_atomic(target, boom)
    assert target.read_text() == "old"

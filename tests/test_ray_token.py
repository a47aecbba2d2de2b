"""Ray's cluster token file is written owner-only (Ray's own was 0644)."""

from __future__ import annotations

import stat

import pytest

from croupier.trainer import ray_token


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_token_is_written_owner_only(home):
    path = ray_token.private_ray_token()
    assert path == home / ".ray" / "auth_token"
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0  # 32 random bytes, hex: as Ray writes
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert ray_token.private_ray_token() == path and path.read_text() == token  # kept


def test_a_readable_token_is_made_owner_only_and_kept(home, caplog):
    path = home / ".ray" / "auth_token"
    path.parent.mkdir()
    path.write_text("abc123")
    path.chmod(0o644)
    assert ray_token.private_ray_token(create=False) == path
    assert mode(path) == 0o600 and path.read_text() == "abc123"
    assert "made 0600" in caplog.text


def test_nothing_is_written_where_the_operator_chose(home, monkeypatch):
    assert ray_token.private_ray_token(create=False) is None  # a cluster of `ray start`'s
    for name, value in (("RAY_AUTH_MODE", "disabled"), ("RAY_AUTH_TOKEN_PATH", "/x"),
                        ("RAY_AUTH_TOKEN", "t")):  # fmt: skip
        monkeypatch.setenv(name, value)
        assert ray_token.private_ray_token() is None
        monkeypatch.delenv(name)
    assert not (home / ".ray").exists()

"""The serving side's structure: one composition root, one way to end a game early, one
grammar for seat specs, and imports that follow the data flow."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from croupier.api.components import build_components
from croupier.config import ServerConfig
from croupier.policies.seats import BadPolicySpec, parse_seat_mix, parse_spec
from croupier.sessions.errors import Unprocessable

GAME = "leduc-holdem"
SRC = Path(__file__).resolve().parents[1] / "src" / "croupier"


def test_the_composition_root_injects_one_of_each(tmp_path) -> None:
    parts = build_components(ServerConfig(game=GAME, data_dir=tmp_path))
    service = parts.service
    assert service.rollout is parts.rollout and service.batcher is parts.batcher
    assert service.outbox is parts.outbox and service.versions is parts.versions
    assert parts.rollout.shadow_forward is parts.batcher  # shadow seats' forwards, typed
    assert parts.rollout.channels.versions is parts.versions

    async def lifetime() -> tuple[bool, bool]:
        await parts.start()
        running = parts.batcher.stats() is not None
        await parts.stop()
        return running, parts.link is None

    assert asyncio.run(lifetime()) == (True, True)


@pytest.mark.parametrize("how", ["abort", "expire"])
def test_ending_a_game_early_is_one_path_and_the_rollout_forgets_it(tmp_path, how) -> None:
    service = build_components(ServerConfig(game=GAME, data_dir=tmp_path)).service
    game_id = service.create_game(GAME, "g", {"0": "canary", "1": "rules"})["game_id"]
    assert service.rollout.tracks(game_id)
    if how == "abort":
        service.abort_game(game_id)
    else:
        assert service.expire_idle_games(0.0) == 1
        assert service.health()["expired_games"] == 1
    assert not service.rollout.tracks(game_id)  # expiry forgot it only in the game store before
    assert service.health()["games_in_flight"] == 0


GOOD = [
    "rules",
    "random",
    "learned",
    "learned@latest",
    "frozen@3",
    "frozen@-1",
    "frozen@-0",
    "production",
    "canary",
    "league",
    "shadow",
    "shadow@latest",
    "shadow@2",
    " rules ",
]
BAD = ["league@3", "canary@x", "shadow@x", "frozen@x", "frozen@", "learned@5", "rules@1", "x"]


def test_one_grammar_for_the_seat_mix_and_a_game_s_seats(tmp_path) -> None:
    for spec in GOOD:
        assert parse_seat_mix(spec) == [spec.strip()]
        assert parse_spec(spec.strip()).name == spec.strip().partition("@")[0]
    service = build_components(ServerConfig(game=GAME, data_dir=tmp_path)).service
    for spec in BAD:
        with pytest.raises(BadPolicySpec) as in_mix:
            parse_seat_mix(spec)
        with pytest.raises(Unprocessable) as in_game:
            service.create_game(GAME, None, {"0": spec})
        assert str(in_mix.value) == str(in_game.value), spec


# engine → games → api → sessions → policies → trajectories → link → trainer → arena; api is the
# server's outer layer. What policies/ and sessions/ must never import, for their own logic:
FORBIDDEN = {
    "policies": ("api", "sessions", "trajectories", "link", "trainer", "arena", "dashboard",
                 "bench", "cli", "demo"),
    "sessions": ("api", "link", "trainer", "arena", "dashboard", "bench", "cli", "demo"),
}  # fmt: skip


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_imports_follow_the_data_flow(folder: str) -> None:
    found = []
    for path in sorted((SRC / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )  # fmt: skip
            for name in names:
                parts = name.split(".")
                if parts[0] == "croupier" and len(parts) > 1 and parts[1] in FORBIDDEN[folder]:
                    found.append(f"{path.relative_to(SRC)}: {name}")
    assert not found, found

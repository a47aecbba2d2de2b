"""Seat policy specs: the strings a game's seats are given, parsed once at game creation.

- `rules`: the game's rule-based bot (what the studio runs today)
- `random`: uniform over the legal actions
- `learned`: the learning policy; recorded for training. Pinned to the version current at game
  creation, or following the newest version when the game (or server) says `pin: latest`
- `learned@latest`: the learning policy, always the newest version, recorded
- `frozen@N` / `frozen@-K`: a fixed version: N itself, or the one K places before the newest
  among the versions loaded (version numbers are the learner's update counter and jump); an
  opponent, never recorded

Rollout specs (`policies/rollout.py` resolves them to the above): `production` (the version the
production channel points at), `canary` (production for a configured share of new games, the
rules for the rest), `shadow`/`shadow@latest`/`shadow@N` (the rules act; a learned version is
computed beside them and compared) and `league` (a frozen version from the league pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PolicyKind = Literal["rules", "random", "learned", "frozen"]
PIN_CHOICES = ("created", "latest")
ROLLOUT_SPECS = ("production", "canary", "shadow", "league")


class BadPolicySpec(ValueError):
    pass


@dataclass(frozen=True)
class SeatPolicy:
    kind: PolicyKind
    version: int | None = None  # the pinned version (learned/frozen); None follows the newest
    record: bool = False
    # A rollout seat's name ("production", "shadow"); `label()` reports it instead.
    channel: str | None = None

    @property
    def uses_model(self) -> bool:
        return self.kind in ("learned", "frozen")

    def label(self) -> str:
        if self.channel is not None:
            return self.channel
        if self.kind == "frozen":
            return f"frozen@{self.version}"
        if self.kind == "learned" and self.version is None:
            return "learned@latest"
        return self.kind


def parse_seat_policy(
    spec: str, *, latest: int, pin: str = "created", loaded: list[int] | None = None
) -> SeatPolicy:
    """Parse a seat spec against the newest version `latest` and the `loaded` versions."""
    if pin not in PIN_CHOICES:
        raise BadPolicySpec(f"pin must be one of {PIN_CHOICES}, got {pin!r}")
    name, _, arg = spec.strip().partition("@")
    if name in ("rules", "random") and not arg:
        return SeatPolicy(name)  # type: ignore[arg-type]
    if name == "learned":
        if arg == "latest" or (not arg and pin == "latest"):
            return SeatPolicy("learned", None, record=True)
        if not arg:
            return SeatPolicy("learned", latest, record=True)
    if name == "frozen" and arg:
        try:
            n = int(arg)
        except ValueError:
            raise BadPolicySpec(f"frozen@ needs a version number, got {arg!r}") from None
        if not arg.startswith("-"):  # "-0" is relative too: the newest loaded version
            if n < 0:
                raise BadPolicySpec(f"frozen@ needs a version number, got {arg!r}")
            return SeatPolicy("frozen", n)
        versions = sorted(loaded or [latest])
        return SeatPolicy("frozen", versions[max(0, len(versions) - 1 + n)])
    raise BadPolicySpec(
        f"unknown seat policy {spec!r}: use rules, random, learned, learned@latest, "
        "frozen@N or frozen@-K"
    )


def parse_seat_mix(text: str) -> list[str]:
    """`learned,rules` -> ['learned', 'rules'], each checked for syntax."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise BadPolicySpec("the seat mix is empty")
    for s in specs:
        name, _, arg = s.partition("@")
        if name in ROLLOUT_SPECS and (not arg or name == "shadow"):
            continue  # checked per game by policies/rollout.py
        parse_seat_policy(s, latest=0)
    return specs

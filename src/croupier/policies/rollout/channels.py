"""The production channel: which learned version players get, with rollback and an audit log.

`latest` is whatever the trainer pushed last; `production` moves only when someone (or
`croupier promote --auto`, with evidence) promotes a version. The versions production points at
now and before (the rollback history) are pinned in memory, and with a weights dir they are
persisted beside the trainer's versions, so a restarted server keeps its production version,
its canary share and its recent events:

    <weights-dir>/channels.json        {"production": 12, "history": [7, 3], "canary_share": 0.05}
    <weights-dir>/channels/v00000012.npz  the weights of every version ever promoted (kept:
                                          `croupier export` and a rollback by hand need them)
    <weights-dir>/promotions.jsonl     one line per promote/rollback/canary change, with evidence

A fleet keeps one production version and one canary share by sending the same change to every
server (`croupier promote --url a,b`, `croupier.arena.fleet`): each server's channel is its own.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from croupier.policies.learned import PolicyVersions
from croupier.policies.weights_file import (
    WeightsState,
    read_weights,
    weights_path,
    write_json,
    write_weights,
)

log = logging.getLogger(__name__)

STATE_FILE = "channels.json"
WEIGHTS_SUBDIR = "channels"
LOG_FILE = "promotions.jsonl"
HISTORY_MAX = 8
RECENT_EVENTS = 100
# Enough for RECENT_EVENTS lines with evidence (an arena result is ~1 KB; evidence is capped at
# 64 KB per event by the API, so a few huge ones may leave fewer than 100 events).
EVENTS_TAIL_BYTES = 1 << 20


class ChannelError(ValueError):
    """A promote or rollback that cannot be done (the API answers 409)."""


def check_share(share: float) -> float:
    """A canary share is a probability; NaN and infinities are not."""
    if not (isinstance(share, int | float) and 0.0 <= share <= 1.0):  # NaN fails both tests
        raise ValueError(f"canary share must be between 0 and 1, got {share!r}")
    return float(share)


class Channels:
    def __init__(
        self, versions: PolicyVersions, weights_dir: Path | None = None, canary_share: float = 0.0
    ):
        self.versions = versions
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self.production: int | None = None
        self.history: list[int] = []  # earlier production versions, newest last
        # The flag's value until an admin changes it; a persisted change wins over the flag,
        # so a restarted server does not leave the fleet's share (see `start_share`).
        self.canary_share = check_share(canary_share)
        self._share_persisted = False
        self.events: deque[dict[str, Any]] = deque(maxlen=RECENT_EVENTS)
        self._lock = threading.Lock()
        self._load()
        self._load_events()

    # --- views ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "latest": self.versions.latest,
            "production": self.production,
            "history": list(self.history),
            "canary_share": self.canary_share,
            "persisted": self.weights_dir is not None,
            "events": list(self.events),
        }

    # --- changes -------------------------------------------------------------------------

    def promote(self, version: int, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._lock:
            weights = self._loaded_weights(version)
            previous = self.production
            if previous == version:
                raise ChannelError(f"version {version} is already production")
            self.versions.retain(version, weights)
            self._save_weights(version, weights)
            if previous is not None:
                self.history.append(previous)
                while len(self.history) > HISTORY_MAX:
                    self._forget(self.history.pop(0))
            self.production = version
            return self._commit("promote", version, previous, evidence)

    def rollback(self, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._lock:
            if not self.history:
                raise ChannelError("nothing to roll back to: production has no earlier version")
            previous = self.production
            self.production = self.history.pop()
            if previous is not None and previous not in self.history:
                self._forget(previous)
            return self._commit("rollback", self.production, previous, evidence)

    def start_share(self, flag: float) -> None:
        """The server's `--canary-share`: used unless an admin's change was persisted (a
        restarted server keeps the fleet's share; said in the log when the two differ)."""
        flag = check_share(flag)
        if not self._share_persisted:
            self.canary_share = flag
        elif flag != self.canary_share:
            log.warning(
                "canary share %s from %s (set at run time) is kept over --canary-share %s",
                self.canary_share, STATE_FILE, flag,
            )  # fmt: skip

    def set_canary_share(
        self, share: float, evidence: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The share of new games whose `canary` seats get production, from the next game on."""
        share = check_share(share)
        with self._lock:
            previous = self.canary_share
            self.canary_share, self._share_persisted = share, True
            return self._commit(
                "canary", self.production, self.production, evidence,
                previous_canary_share=previous,
            )  # fmt: skip

    # --- internals -----------------------------------------------------------------------

    def _loaded_weights(self, version: int) -> WeightsState:
        if version not in self.versions.versions():
            raise ChannelError(
                f"version {version} is not loaded; loaded: {self.versions.versions()}"
            )
        served, _ = self.versions.resolve(version)
        if served != version:  # evicted between the check and now
            raise ChannelError(f"version {version} was just evicted")
        return self.versions.weights(version)

    def _forget(self, version: int) -> None:
        """Out of the rollback history: it may leave memory, but its file in `channels/`
        stays (every promoted version is kept on disk: weights retention, README)."""
        if version == self.production or version in self.history:
            return
        self.versions.release(version)

    def _commit(
        self,
        action: str,
        version: int | None,
        previous: int | None,
        evidence: Any,
        **extra: Any,
    ) -> dict[str, Any]:
        event = {
            "time": time.time(),
            "action": action,
            "production": version,
            "previous": previous,
            "latest": self.versions.latest,
            "canary_share": self.canary_share,
            **extra,
            "evidence": evidence,
        }
        self.events.append(event)
        if self.weights_dir is not None:
            state: dict[str, Any] = {"production": self.production, "history": self.history}
            if self._share_persisted:  # only a run-time change outlives the flag
                state["canary_share"] = self.canary_share
            self._write_json(self.weights_dir / STATE_FILE, state)
            with (self.weights_dir / LOG_FILE).open("a") as f:
                f.write(json.dumps(event) + "\n")
        log.warning(
            "%s: production %s -> %s, canary share %s", action, previous, version, self.canary_share
        )
        return event

    def _save_weights(self, version: int, weights: WeightsState) -> None:
        if self.weights_dir is None:
            return
        write_weights(weights_path(self.weights_dir / WEIGHTS_SUBDIR, version), weights)

    @staticmethod
    def _write_json(path: Path, data: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, data)

    def _load(self) -> None:
        if self.weights_dir is None or not (self.weights_dir / STATE_FILE).exists():
            return
        try:
            data = json.loads((self.weights_dir / STATE_FILE).read_text())
            production = data.get("production")
            history = [int(v) for v in data.get("history", [])]
            share = data.get("canary_share")
            if share is not None:
                share = check_share(share)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.warning("ignoring unreadable %s: %s", STATE_FILE, e)
            return
        if share is not None:
            self.canary_share, self._share_persisted = share, True
        for version in [*history, production]:
            if version is None:
                continue
            path = weights_path(self.weights_dir / WEIGHTS_SUBDIR, int(version))
            try:
                self.versions.retain(int(version), read_weights(path))
            except (ValueError, RuntimeError, KeyError) as e:  # UnreadableWeights included
                log.warning("channel version %s cannot be loaded (%s); dropped", version, e)
                continue
            if version == production:
                self.production = int(version)
            else:
                self.history.append(int(version))
        log.info("production channel: %s (history %s)", self.production, self.history)

    def _load_events(self) -> None:
        """The last events of `promotions.jsonl`, so `events` survives a restart. Only the
        file's tail is read (it grows by one line per change); damaged lines are skipped."""
        if self.weights_dir is None:
            return
        path = self.weights_dir / LOG_FILE
        try:
            with path.open("rb") as f:
                f.seek(max(0, path.stat().st_size - EVENTS_TAIL_BYTES))
                lines = f.read().splitlines()
        except FileNotFoundError:
            return
        except OSError as e:
            log.warning("cannot read %s: %s", path, e)
            return
        skipped = 0
        for line in lines[-RECENT_EVENTS:]:
            try:
                event = json.loads(line)
            except ValueError:
                skipped += 1  # a line cut by the tail's start, or by a crash mid-write
                continue
            if isinstance(event, dict) and "action" in event:
                self.events.append(event)
            else:
                skipped += 1
        if skipped:
            log.info("%d unreadable lines in the tail of %s skipped", skipped, path)

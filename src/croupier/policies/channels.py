"""The production channel: which learned version players get, with rollback and an audit log.

`latest` is whatever the trainer pushed last; `production` moves only when someone (or
`croupier promote --auto`, with evidence) promotes a version. The versions production points at
now and before (the rollback history) are pinned in memory, and with a weights dir they are
persisted beside the trainer's versions, so a restarted server keeps its production version:

    <weights-dir>/channels.json        {"production": 12, "history": [7, 3]}
    <weights-dir>/channels/v00000012.npz  the weights of every version the channel refers to
    <weights-dir>/promotions.jsonl     one line per promote/rollback, with its evidence
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


class ChannelError(ValueError):
    """A promote or rollback that cannot be done (the API answers 409)."""


class Channels:
    def __init__(self, versions: PolicyVersions, weights_dir: Path | None = None):
        self.versions = versions
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self.production: int | None = None
        self.history: list[int] = []  # earlier production versions, newest last
        self.events: deque[dict[str, Any]] = deque(maxlen=RECENT_EVENTS)
        self._lock = threading.Lock()
        self._load()

    # --- views ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "latest": self.versions.latest,
            "production": self.production,
            "history": list(self.history),
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
        if version == self.production or version in self.history:
            return
        self.versions.release(version)
        if self.weights_dir is not None:
            weights_path(self.weights_dir / WEIGHTS_SUBDIR, version).unlink(missing_ok=True)

    def _commit(
        self, action: str, version: int | None, previous: int | None, evidence: Any
    ) -> dict[str, Any]:
        event = {
            "time": time.time(),
            "action": action,
            "production": version,
            "previous": previous,
            "latest": self.versions.latest,
            "evidence": evidence,
        }
        self.events.append(event)
        if self.weights_dir is not None:
            self._write_json(
                self.weights_dir / STATE_FILE,
                {"production": self.production, "history": self.history},
            )
            with (self.weights_dir / LOG_FILE).open("a") as f:
                f.write(json.dumps(event) + "\n")
        log.warning("%s: production %s -> %s", action, previous, version)
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
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.warning("ignoring unreadable %s: %s", STATE_FILE, e)
            return
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

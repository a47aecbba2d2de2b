"""Difficulty tiers: `tier:1` (easiest) to `tier:5` (the best version), each a version of the
history played at a temperature and mixed with the rules, at the strength the arena measured.

A tier's setting is three knobs a seat spec already spells (`policies/seats.py`):

    frozen@V                  version V, sampled as trained
    frozen@V:greedy           its most likely legal action (temperature 0 in the file)
    frozen@V:temp=T           sampled from softmax(logits / T): above 1 weaker, towards uniform
    frozen@V:...:rules=P      with probability P per decision the rules act instead

or, above the best version, a search over its play (`policies/search.py`; a game whose
simulator deals worlds, a server with search workers):

    search:base=frozen@V[:greedy]:rollouts=N    N worlds a move searched, played out by V

`croupier tiers calibrate` (`arena/tiers.py`) measures candidate settings in the arena against
the rules (the strength score, `arena/duplicate.py`, with its 95% CI), chooses five whose
strengths are strictly ordered with CIs apart, measures those again on fresh deals, and writes
the calibration here, in the server's weights dir (its state dir, beside `channels.json` and
`ratings.json`):

    <weights-dir>/tiers.json  {"format": 1, "game": ..., "production": 12, "yardstick": "rules",
                               "side": null (or the side measured alone: "landlord"),
                               "tiers": [{"tier": 1, "version": 3, "temperature": 1.0,
                                          "rules_share": 0.6, "spec": ..., "score": ...,
                                          "ci95": ..., "hands": ...}, ...], ...}

`production` is the version the calibration was made for: after a promotion the file is stale
(`TierTable.state` says so) until it is calibrated again (`croupier promote --tiers`, or the
command run after a promotion); a stale calibration still serves, so a game that asked for
`tier:2` is never refused between a promotion and its calibration.

The server re-reads the file when it changes (as the league pool re-reads `ratings.json`) and
keeps the tiers' versions loaded while they are in the calibration (`PolicyVersions.retain`):
retention never deletes a version a tier plays.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from croupier.policies.learned import PolicyVersions
from croupier.policies.seats import (
    GREEDY,
    MAX_SEARCH_ROLLOUTS,
    MAX_TEMPERATURE,
    SEARCH,
    TIERS,
    SearchSpec,
    SeatPolicy,
    SeatUnavailable,
    tuning_suffix,
)
from croupier.policies.weights_file import read_weights, weights_path, write_json

log = logging.getLogger(__name__)

CALIBRATION_FILE = "tiers.json"
CALIBRATION_FORMAT = 1
CHANNEL_WEIGHTS = "channels"  # every promoted version's weights (`rollout/channels.py`)


class BadCalibration(ValueError):
    """A calibration file this module will not serve (said in one line)."""


@dataclass(frozen=True)
class TierSetting:
    """One way to play: version, temperature (0: greedy) and the rules' share of decisions;
    or, with `rollouts` (0: none), a search over the version's play (greedy or as trained),
    that many worlds a move."""

    version: int
    temperature: float = 1.0
    rules_share: float = 0.0
    rollouts: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.version, int) and self.version >= 0):
            raise BadCalibration(f"a tier's version is a version number, got {self.version!r}")
        if not (0.0 <= self.temperature <= MAX_TEMPERATURE):  # NaN fails too
            raise BadCalibration(f"a tier's temperature is 0 to 100, got {self.temperature!r}")
        if not (0.0 <= self.rules_share <= 1.0):
            raise BadCalibration(f"a tier's rules share is 0 to 1, got {self.rules_share!r}")
        if not (isinstance(self.rollouts, int) and 0 <= self.rollouts <= MAX_SEARCH_ROLLOUTS):
            raise BadCalibration(
                f"a tier's rollouts are 0 to {MAX_SEARCH_ROLLOUTS}, got {self.rollouts!r}"
            )
        if self.rollouts and (self.temperature not in (0.0, 1.0) or self.rules_share):
            # A search's base is a version as trained or greedy: no other tuning.
            raise BadCalibration("a search tier plays its version greedy or as trained alone")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def _search(self) -> SearchSpec:
        base = f"frozen@{self.version}" + (f":{GREEDY}" if self.greedy else "")
        return SearchSpec(base=base, rollouts=self.rollouts)

    def spec(self) -> str:
        """The seat spec that plays this setting (what the arena seats while calibrating)."""
        if self.rollouts:
            return self._search().spec()
        temperature = 1.0 if self.greedy else self.temperature
        return f"frozen@{self.version}" + tuning_suffix(self.greedy, temperature, self.rules_share)

    def policy(self, tier: int) -> SeatPolicy:
        """The seat `tier:N` plays: never recorded (its actions are not the learner's samples)."""
        if self.rollouts:
            return SeatPolicy(SEARCH, self.version, channel=f"tier:{tier}", search=self._search())
        return SeatPolicy(
            "frozen",
            self.version,
            channel=f"tier:{tier}",
            greedy=self.greedy,
            temperature=1.0 if self.greedy else self.temperature,
            rules_share=self.rules_share,
        )

    @classmethod
    def of(cls, data: dict[str, Any]) -> TierSetting:
        if not isinstance(data, dict):
            raise BadCalibration(f"a tier is an object, got {type(data).__name__}")
        try:
            return cls(
                int(data["version"]),
                float(data["temperature"]),
                float(data["rules_share"]),
                int(data.get("rollouts", 0)),  # a calibration before search tiers has none
            )
        except (KeyError, TypeError, ValueError) as e:
            raise BadCalibration(f"a tier needs version, temperature and rules_share: {e}") from e

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "spec": self.spec()}


def check_calibration(data: Any) -> list[TierSetting]:
    """The five tiers' settings of a calibration (`BadCalibration` for anything else)."""
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise BadCalibration(f"not a tiers calibration of format {CALIBRATION_FORMAT}")
    tiers = data.get("tiers")
    numbers = [t.get("tier") if isinstance(t, dict) else None for t in tiers or ()]
    if not isinstance(tiers, list) or numbers != list(range(1, TIERS + 1)):
        raise BadCalibration(f"a calibration lists tiers 1 to {TIERS}, in order, as objects")
    return [TierSetting.of(t) for t in tiers]


def write_calibration(weights_dir: Path, data: dict[str, Any]) -> Path:
    """Store a calibration in a server's weights dir, atomically (a server reading it sees the
    old file or the new one); checked first."""
    check_calibration(data)
    path = Path(weights_dir) / CALIBRATION_FILE
    write_json(path, data)
    return path


def read_calibration(weights_dir: Path) -> dict[str, Any] | None:
    """The calibration in `weights_dir`, None when there is none."""
    path = Path(weights_dir) / CALIBRATION_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise BadCalibration(f"{path}: {e}") from None
    try:
        check_calibration(data)
    except BadCalibration as e:  # which file: the operator edits one by hand
        raise BadCalibration(f"{path}: {e}") from None
    return data


class TierTable:
    """The server's tiers: the calibration in its weights dir, re-read when the file changes
    (a stat per tier seat seated, ~2 us), its versions kept loaded while it names them."""

    def __init__(
        self,
        weights_dir: Path | None,
        versions: PolicyVersions,
        held: Callable[[], Iterable[int]] = tuple,
    ):
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self.versions = versions
        self.held = held  # versions something else retains (the channels): never released here
        self._lock = threading.Lock()
        self._data: dict[str, Any] | None = None
        self._settings: list[TierSetting] = []
        self._mtime: float | None = None
        self.problem: str | None = None  # why the file on disk is not served, if it is not

    def policy(self, tier: int) -> SeatPolicy:
        """`tier:N`'s seat now (`SeatUnavailable` when nothing is calibrated)."""
        self.refresh()
        settings = self._settings
        if not settings:
            where = "" if self.weights_dir else " (this server has no --weights-dir)"
            raise SeatUnavailable(f"no tiers calibrated yet: run croupier tiers calibrate{where}")
        return settings[tier - 1].policy(tier)

    def refresh(self) -> None:
        """Read the calibration again if its file changed since (a bad file keeps the last good
        one serving, and says why in `problem`)."""
        if self.weights_dir is None:
            return
        path = self.weights_dir / CALIBRATION_FILE
        try:
            mtime: float | None = path.stat().st_mtime
        except FileNotFoundError:
            mtime = None
        except OSError:
            return
        if mtime == self._mtime:
            return
        with self._lock:
            if mtime == self._mtime:
                return
            self._mtime = mtime
            try:
                data = read_calibration(self.weights_dir)
                if data is None:
                    return
                settings = check_calibration(data)
                self._retain(settings)
            except Exception as e:  # noqa: BLE001 - a bad file must never stop serving
                # The file's problem, whatever it is (a hand-edited file once stopped `serve`
                # with an AttributeError): the last good tiers serve on, production untouched.
                problem = str(e) if isinstance(e, BadCalibration) else f"{type(e).__name__}: {e}"
                self.problem = problem if str(path) in problem else f"{path}: {problem}"
                log.warning("not serving the tiers: %s", self.problem)
                return
            self.problem = None
            self._data, self._settings = data, settings
            log.info(
                "tiers calibrated for production %s: %s",
                data.get("production"),
                ", ".join(s.spec() for s in settings),
            )

    def _retain(self, settings: list[TierSetting]) -> None:
        """Keep the new tiers' versions loaded (read from disk when not in memory); let the
        old ones go unless something else holds them."""
        wanted = {s.version for s in settings}
        loaded = set(self.versions.versions())
        for version in sorted(wanted):
            weights = None if version in loaded else self._weights_on_disk(version)
            self.versions.retain(version, weights)
        held = set(self.held())
        for old in {s.version for s in self._settings} - wanted - held:
            self.versions.release(old)

    def _weights_on_disk(self, version: int) -> Any:
        assert self.weights_dir is not None
        for folder in (self.weights_dir, self.weights_dir / CHANNEL_WEIGHTS):
            path = weights_path(folder, version)
            if path.exists():
                return read_weights(path)
        raise BadCalibration(f"version {version} is neither loaded nor in {self.weights_dir}")

    def state(self, production: int | None) -> dict[str, Any]:
        """What `/v1/tiers` and the dashboard show: the calibration, and whether production
        moved since it was made."""
        self.refresh()
        data = self._data
        calibrated_for = None if data is None else data.get("production")
        return {
            "calibrated": data is not None,
            "production": production,
            "calibrated_for": calibrated_for,
            "stale": data is not None and calibrated_for != production,
            "age_s": None if data is None else _age(data.get("time")),
            "problem": self.problem,
            "calibration": data,
        }


def _age(created: Any) -> float | None:
    if not isinstance(created, int | float) or not math.isfinite(created):
        return None
    return round(time.time() - float(created), 1)

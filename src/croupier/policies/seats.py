"""Seat policy specs: the strings a game's seats are given, parsed once at game creation.

- `rules`: the game's rule-based bot (what the studio runs today)
- `random`: uniform over the legal actions
- `best-response`: the exact best response to the newest version, on a game small enough to
  walk whole (Kuhn, Leduc: `policies/best_response.py`); an opponent, never recorded
- `learned`: the learning policy; recorded for training. Pinned to the version current at game
  creation, or following the newest version when the game (or server) says `pin: latest`
- `learned@latest`: the learning policy, always the newest version, recorded
- `frozen@N` / `frozen@-K`: a fixed version: N itself, or the one K places before the newest
  among the versions loaded (version numbers are the learner's update counter and jump); an
  opponent, never recorded
- `<spec>:greedy` (after `learned`, `learned@latest`, `frozen@…`, `production`, `league`): the
  version's most likely legal action instead of a sample from its policy: for evaluation and
  for production play. Never recorded: a greedy action was not drawn from the policy, so its
  log-prob is not the behaviour's (the learner's importance ratios would be wrong), and the
  learner's targets come from sampled play only
- `<spec>:temp=T` and/or `…:rules=P` (after `frozen@…` and `production`; `:rules=P` may follow
  `:greedy` too): the version sampled from its softmax at temperature T (above 1 plays
  weaker and wider, towards uniform; below 1 sharper, towards greedy), and with probability P
  per decision the rules' action instead. Never recorded (neither is the learner's sample).
  The knobs a difficulty tier is built from (`policies/tiers.py`)

Search (`policies/search.py`): `search:base=B:vs=O:rollouts=N:ms=D:top=K`, every part
optional (in this order; defaults `base=rules`, `rollouts=64`, `ms=200`, `top=8`): for each
legal move (at most K of them), N worlds consistent with what the seat sees, the move played
out by the base policy B (`rules`, `random`, or a version: `frozen@N`, `production`,
`learned@latest`, resolved at the game's start, `:greedy` or sampled) for the searching seat
and by O (`rules` or `random`; without `vs`, B) for the others, the best mean chosen; the
base policy's move answered (`"fallback": true`) when D milliseconds pass first. An opponent
and evaluation seat, never recorded; a game whose simulator cannot set a table from a seat's
view (`Simulator.resample`) cannot seat it (409).

Rollout specs (the same grammar; `policies/rollout/` resolves them to the above, per game):
`production` (the version the production channel points at), `canary` (production for a
configured share of new games, the rules for the rest), `shadow`/`shadow@latest`/`shadow@N`
(the rules act; a learned version is computed beside them and compared), `league` (a frozen
version from the league pool) and `tier:N` (N = 1 easiest .. 5: a difficulty level, the
version, temperature and rules share the arena calibrated for it: `policies/tiers.py`).

One grammar (`parse_spec`) checks every spec's syntax, for a game's seats and for the
server's `--seat-mix` alike; resolving a spec against the loaded versions comes after.

Why ~450 lines in one module: one grammar of seat specs (`parse_spec`, the published pattern,
the labels and their inverse); split, the pattern could admit a spec the parser refuses."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

PolicyKind = Literal["rules", "random", "learned", "frozen", "best-response", "search"]
BEST_RESPONSE = "best-response"
SEARCH = "search"
PIN_CHOICES = ("created", "latest")
ROLLOUT_SPECS = ("production", "canary", "shadow", "league", "tier")
# The specs a `:greedy` suffix may follow: those that play a learned version.
GREEDY_SPECS = ("learned", "frozen", "production", "league")
GREEDY = "greedy"
# The specs `:temp=T` and `:rules=P` may follow: a fixed version, not recorded.
TUNED_SPECS = ("frozen", "production")
TIERS = 5  # difficulty tiers: tier:1 (easiest) .. tier:5 (the best version)
MAX_TEMPERATURE = 100.0  # past ~10 a leduc version is already uniform to 1e-2


class BadPolicySpec(ValueError):
    pass


class SeatUnavailable(BadPolicySpec):
    """A well-formed spec this server cannot seat now: a version not loaded, no production
    version yet, no offline writer for `record: "rules"` (409, not 422: the request is right,
    the server's state is not; `SEAT_SPEC_PATTERN` says exactly which specs are well-formed)."""


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """A search seat's settings (`search:base=B:vs=O:rollouts=N:ms=D:top=K`): what it plays
    out, in how many worlds, within how many milliseconds, over how many moves at most."""

    base: str = "rules"  # the policy the searching seat plays in the rollouts (SEARCH_BASES)
    # The other seats' policy in the rollouts (SEARCH_BASES); None: the base. A version trained
    # on one side (doudizhu's landlord) has never played the other: its rollouts model the
    # opponents by the rules.
    vs: str | None = None
    rollouts: int = 64  # worlds per move searched (the same worlds for every move)
    ms: int = 200  # the decision's deadline: past it the base policy's move is answered
    top: int = 8  # moves searched at most; the rest are not (the base's own move always is)

    def spec(self) -> str:
        """The seat spec spelt in full (what `label()` answers and `parse_spec` reads back)."""
        vs = f":vs={self.vs}" if self.vs is not None else ""
        return (f"{SEARCH}:base={self.base}{vs}:rollouts={self.rollouts}:ms={self.ms}"
                f":top={self.top}")  # fmt: skip

    @property
    def base_version(self) -> int | None:
        """A `frozen@N` base's version (None: the rules, random play, or not yet resolved)."""
        name = self.base.partition(":")[0]
        return int(name.removeprefix("frozen@")) if name.startswith("frozen@") else None

    @property
    def base_greedy(self) -> bool:
        return self.base.endswith(f":{GREEDY}")

    @property
    def counted_base(self) -> str:
        """The base's kind, a bounded label: `rules`, `random` or `version`."""
        return self.base if self.base in SEARCH_BASES else "version"


SEARCH_BASES = ("rules", "random")  # bases without a model (a version's: `frozen@N` and kin)
_VERSION_BASE = r"(?:frozen@[0-9]+|production|learned@latest)(?::greedy)?"
# Bounds a spec cannot pass (the published pattern spells them): a decision that may search
# 10 s or play 4,096 worlds per move is already past any engine's patience.
MAX_SEARCH_ROLLOUTS = 4096
MAX_SEARCH_MS = 10_000
MAX_SEARCH_TOP = 64
_ROLLOUTS = r"(?:[1-9][0-9]{0,2}|[1-3][0-9]{3}|40[0-8][0-9]|409[0-6])"  # 1..4096
_MS = r"(?:[1-9][0-9]{0,3}|10000)"  # 1..10000
_TOP = r"(?:[2-9]|[1-5][0-9]|6[0-4])"  # 2..64
_SEARCH = (
    rf"{SEARCH}(?::base=(?:{'|'.join(SEARCH_BASES)}|{_VERSION_BASE}))?"
    rf"(?::vs=(?:{'|'.join(SEARCH_BASES)}))?(?::rollouts={_ROLLOUTS})?(?::ms={_MS})?(?::top={_TOP})?"
)

# Every well-formed seat spec (`parse_spec`'s grammar), as the API documents it.
# Exactly the values `_tuning` takes, so the published schema admits no spec the server
# refuses: a temperature above 0 and at most 100 (`MAX_TEMPERATURE`), a share from 0 to 1.
_TEMPERATURE = r"(?:[1-9][0-9]?(?:\.[0-9]{1,6})?|0\.[0-9]{0,5}[1-9][0-9]{0,5}|100(?:\.0{1,6})?)"
_SHARE = r"(?:0(?:\.[0-9]{1,6})?|1(?:\.0{1,6})?)"
SEAT_SPEC_PATTERN = (
    r"^(?:(?:league|learned(?:@latest)?)(?::greedy)?"
    rf"|(?:production|frozen@-?[0-9]+)(?::greedy|:temp={_TEMPERATURE})?(?::rules={_SHARE})?"
    rf"|tier:[1-{TIERS}]|rules|random|best-response|canary|shadow(?:@latest|@[0-9]+)?"
    rf"|{_SEARCH})$"
)
_SPEC = re.compile(SEAT_SPEC_PATTERN.removeprefix("^").removesuffix("$"))


def well_formed_spec(text: str) -> bool:
    """Whether `text` is in the seat-spec grammar (as `SEAT_SPEC_PATTERN` documents it)."""
    return _SPEC.fullmatch(text) is not None


@dataclass(frozen=True)
class SeatPolicy:
    kind: PolicyKind
    version: int | None = None  # the pinned version (learned/frozen); None follows the newest
    record: bool = False
    # A rollout seat's name ("production", "shadow"); `label()` reports it instead.
    channel: str | None = None
    # The model's most likely legal action, not a sample (never recorded: see the module doc).
    greedy: bool = False
    # Sampled from softmax(logits / temperature) (1: as trained; never recorded otherwise).
    temperature: float = 1.0
    # The probability, per decision, that the rules act instead (a tier's mix; not recorded).
    rules_share: float = 0.0
    # A search seat's settings (kind "search"; `policies/search.py`).
    search: SearchSpec | None = None

    def __post_init__(self) -> None:
        # Asked at every decision (the decisions-by-policy counter): built once. A tier seat
        # is named by its tier alone: its settings are the calibration's, not the engine's.
        label = self._label()
        if not (self.channel or "").startswith("tier:"):
            label += tuning_suffix(self.greedy, self.temperature, self.rules_share)
        object.__setattr__(self, "_label_text", label)

    @property
    def uses_model(self) -> bool:
        return self.kind in ("learned", "frozen")

    def label(self) -> str:
        return self._label_text  # type: ignore[attr-defined]

    def _label(self) -> str:
        if self.channel is not None:
            return self.channel
        if self.search is not None:
            return self.search.spec()
        if self.kind == "frozen":
            return f"frozen@{self.version}"
        if self.kind == "learned" and self.version is None:
            return "learned@latest"
        return self.kind


@dataclass(frozen=True, slots=True)
class SeatSpec:
    """A seat spec whose syntax is checked: `name`, and its argument's meaning."""

    name: str
    latest: bool = False  # learned@latest, shadow@latest
    version: int | None = None  # frozen@N / frozen@-K (then `relative`), shadow@N
    relative: bool = False
    greedy: bool = False  # `…:greedy`
    temperature: float = 1.0  # `…:temp=T`
    rules_share: float = 0.0  # `…:rules=P`
    tier: int | None = None  # tier:N
    search: SearchSpec | None = None  # search:…

    @property
    def rollout(self) -> bool:
        return self.name in ROLLOUT_SPECS


def tuning_suffix(greedy: bool, temperature: float, rules_share: float) -> str:
    """`:greedy`, `:temp=T`, `:rules=P` as a spec spells them (`parse_spec` reads them back)."""
    out = f":{GREEDY}" if greedy else (f":temp={temperature:g}" if temperature != 1.0 else "")
    return out + (f":rules={rules_share:g}" if rules_share else "")


def _tuning(spec: SeatSpec, text: str, modes: str) -> SeatSpec:
    """`spec` with its `:greedy` / `:temp=T` / `:rules=P` (`modes`: what followed its name)."""
    changes: dict[str, object] = {}
    for mode in modes.split(":"):
        key, eq, value = mode.partition("=")
        if mode == GREEDY:
            changes["greedy"] = True
        elif eq and key == "temp":
            temperature = float(value)
            if not 0.0 < temperature <= MAX_TEMPERATURE:
                raise BadPolicySpec(
                    f"{text!r}: a temperature is above 0 and at most {MAX_TEMPERATURE:g} "
                    "(0 is :greedy)"
                )
            changes["temperature"] = temperature
        elif eq and key == "rules":
            share = float(value)
            if not 0.0 <= share <= 1.0:
                raise BadPolicySpec(f"{text!r}: a rules share is a probability, 0 to 1")
            changes["rules_share"] = share
    return dataclasses.replace(spec, **changes)  # type: ignore[arg-type]


# A server sees a handful of distinct specs (its seat mix, the engines' few), parsed per seat of
# every new game: cached, a spec costs a dict lookup (SeatSpec is frozen: safe to share).
@functools.lru_cache(maxsize=1024)
def parse_spec(text: str) -> SeatSpec:
    """The one grammar of seat specs (plain and rollout); `BadPolicySpec` if it is not one."""
    if text == SEARCH or text.startswith(f"{SEARCH}:"):
        return SeatSpec(SEARCH, search=_search_spec(text))
    if text.startswith("tier:"):
        if not well_formed_spec(text):
            raise BadPolicySpec(
                f"unknown seat policy {text!r}: the tiers are tier:1 (easiest) to tier:{TIERS}"
            )
        return SeatSpec("tier", tier=int(text.removeprefix("tier:")))
    body, colon, mode = text.partition(":")
    if colon:
        spec = parse_spec(body)
        if spec.name not in GREEDY_SPECS or (mode != GREEDY and spec.name not in TUNED_SPECS):
            raise BadPolicySpec(
                f"unknown seat policy {text!r}: only {', '.join(GREEDY_SPECS)} take ':greedy', "
                f"only {' and '.join(TUNED_SPECS)} ':temp=T' and ':rules=P' (in that order)"
            )
        if not well_formed_spec(text):
            raise BadPolicySpec(
                f"unknown seat policy {text!r}: a model's spec may end in ':greedy' or "
                "':temp=T', then ':rules=P' (T above 0, P from 0 to 1)"
            )
        return _tuning(spec, text, mode)
    if not well_formed_spec(body):  # exactly: no spaces, ASCII digits only (no "+5", "٣")
        raise BadPolicySpec(
            f"unknown seat policy {text!r}: use rules, random, best-response, learned, "
            "learned@latest, frozen@N or frozen@-K (or production, canary, shadow[@latest|@N], "
            "league, tier:N, search[:base=B][:vs=O][:rollouts=N][:ms=D][:top=K])"
        )
    name, _, arg = body.partition("@")
    if name in ("rules", "random", BEST_RESPONSE, "production", "canary", "league") and not arg:
        return SeatSpec(name)
    if name == "learned" and arg in ("", "latest"):
        return SeatSpec(name, latest=arg == "latest")
    if name == "frozen" and arg:
        try:
            n = int(arg)
        except ValueError:
            raise BadPolicySpec(f"frozen@ needs a version number, got {arg!r}") from None
        relative = arg.startswith("-")  # "-0" is relative too: the newest loaded version
        if n < 0 and not relative:
            raise BadPolicySpec(f"frozen@ needs a version number, got {arg!r}")
        return SeatSpec(name, version=n, relative=relative)
    if name == "shadow":
        if arg in ("", "latest"):
            return SeatSpec(name, latest=arg == "latest")
        try:
            return SeatSpec(name, version=int(arg))
        except ValueError:
            raise BadPolicySpec(f"shadow@ needs latest or a version, got {arg!r}") from None
    raise BadPolicySpec(
        f"unknown seat policy {text!r}: use rules, random, best-response, learned, "
        "learned@latest, frozen@N or frozen@-K (or production, canary, shadow[@latest|@N], "
        "league, tier:N, search[:…]), a "
        "model's spec optionally followed by ':greedy'"
    )


def _search_spec(text: str) -> SearchSpec:
    """`search[:base=B][:vs=O][:rollouts=N][:ms=D][:top=K]` (that order; omitted parts
    default)."""
    if not well_formed_spec(text):
        raise BadPolicySpec(
            f"unknown seat policy {text!r}: a search seat is search[:base=B][:vs=O][:rollouts=N]"
            f"[:ms=D][:top=K], in that order: B one of {', '.join(SEARCH_BASES)}, frozen@V, "
            f"production, learned@latest (a version's optionally :greedy), O one of "
            f"{', '.join(SEARCH_BASES)}, N 1 to "
            f"{MAX_SEARCH_ROLLOUTS}, D 1 to {MAX_SEARCH_MS} (milliseconds), K 2 to "
            f"{MAX_SEARCH_TOP}"
        )
    tokens: list[str] = []
    for token in text.split(":")[1:]:  # `greedy` belongs to the version base before it
        if token == GREEDY:
            tokens[-1] += f":{GREEDY}"
        else:
            tokens.append(token)
    parts = dict(token.split("=", 1) for token in tokens)
    defaults = SearchSpec()
    return SearchSpec(
        base=parts.get("base", defaults.base),
        vs=parts.get("vs", defaults.vs),
        rollouts=int(parts.get("rollouts", defaults.rollouts)),
        ms=int(parts.get("ms", defaults.ms)),
        top=int(parts.get("top", defaults.top)),
    )


def _search_policy(search: SearchSpec, latest: int) -> SeatPolicy:
    """A search seat, its version base resolved to the version it plays (`learned@latest`:
    the newest now, fixed for the game); the seat holds that version (`version`)."""
    name, colon, mode = search.base.partition(":")
    if name == "learned@latest":
        search = dataclasses.replace(search, base=f"frozen@{latest}{colon}{mode}")
    elif name == "production":
        raise BadPolicySpec("a production base is resolved per game by a server's rollout")
    return SeatPolicy(SEARCH, search.base_version, search=search)


def resolve_plain(
    spec: SeatSpec, *, latest: int, pin: str = "created", loaded: list[int] | None = None
) -> SeatPolicy:
    """A plain (not rollout) spec against the newest version `latest` and the `loaded` ones."""
    if pin not in PIN_CHOICES:
        raise BadPolicySpec(f"pin must be one of {PIN_CHOICES}, got {pin!r}")
    if spec.name in ("rules", "random", BEST_RESPONSE):
        return SeatPolicy(spec.name)  # type: ignore[arg-type]
    if spec.name == SEARCH and spec.search is not None:  # never recorded: an opponent's seat
        return _search_policy(spec.search, latest)
    if spec.name == "learned":
        # A greedy seat is never recorded: its actions are not samples of the behaviour policy.
        record, greedy = not spec.greedy, spec.greedy
        if spec.latest or pin == "latest":
            return SeatPolicy("learned", None, record=record, greedy=greedy)
        return SeatPolicy("learned", latest, record=record, greedy=greedy)
    if spec.name == "frozen" and spec.version is not None:
        version = spec.version
        if spec.relative:
            versions = sorted(loaded or [latest])
            version = versions[max(0, len(versions) - 1 + spec.version)]
        return SeatPolicy(
            "frozen",
            version,
            greedy=spec.greedy,
            temperature=spec.temperature,
            rules_share=spec.rules_share,
        )
    raise BadPolicySpec(f"{spec.name!r} is a rollout seat: a server resolves it per game")


def parse_seat_policy(
    spec: str, *, latest: int, pin: str = "created", loaded: list[int] | None = None
) -> SeatPolicy:
    """Parse a plain seat spec against the newest version `latest` and the `loaded` versions."""
    if pin not in PIN_CHOICES:
        raise BadPolicySpec(f"pin must be one of {PIN_CHOICES}, got {pin!r}")
    return resolve_plain(parse_spec(spec), latest=latest, pin=pin, loaded=loaded)


def parse_seat_mix(text: str) -> list[str]:
    """`learned,rules` -> ['learned', 'rules'], each checked against the grammar."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise BadPolicySpec("the seat mix is empty")
    for s in specs:
        parse_spec(s)
    return specs


def resumed_seat_policy(
    label: str, version: int | None, *, record: bool, served: Callable[[int], int]
) -> SeatPolicy:
    """A seat again, on another server, from what its game's create answered for it (`label`,
    `version`): the inverse of `SeatPolicy.label`. A model version this server does not hold
    is replaced by `served(version)` (the server's pick: `PolicyVersions.resolve`)."""
    suffix = f":{GREEDY}"
    name, colon, modes = label.partition(":")
    if colon and name.partition("@")[0] in TUNED_SPECS and modes != GREEDY:
        # `frozen@12:temp=2:rules=0.3`, `production:rules=0.5`: the version, tuned as before.
        tuned = _tuning(SeatSpec(name), label, modes)
        policy = resumed_seat_policy(name, version, record=False, served=served)
        return dataclasses.replace(
            policy,
            greedy=tuned.greedy,
            temperature=tuned.temperature,
            rules_share=tuned.rules_share,
        )
    if label.endswith(suffix):  # a model's seat, greedy: never recorded
        policy = resumed_seat_policy(
            label.removesuffix(suffix), version, record=False, served=served
        )
        if not policy.uses_model:
            raise BadPolicySpec(f"unknown seat policy {label!r}: only a model's seat is greedy")
        return dataclasses.replace(policy, greedy=True)
    if label in ("rules", "random", BEST_RESPONSE):
        return SeatPolicy(label)  # type: ignore[arg-type]
    if label == SEARCH or label.startswith(f"{SEARCH}:"):  # spelt in full: the same settings
        search = parse_spec(label).search
        assert search is not None
        if search.base_version is not None:  # the version played, or the server's pick
            greedy = f":{GREEDY}" if search.base_greedy else ""
            base = f"frozen@{served(search.base_version)}{greedy}"
            search = dataclasses.replace(search, base=base)
        return _search_policy(search, latest=0)
    if label == "learned@latest":
        return SeatPolicy("learned", None, record=record)
    if label == "canary:rules":
        return SeatPolicy("rules", channel=label)
    if label == "shadow":  # its version: None follows the newest
        return SeatPolicy("rules", None if version is None else served(version), channel=label)
    if label.startswith("frozen@") and version is None:
        version = parse_spec(label).version  # what the label says, when the answer had none
        if version is None or version < 0:
            raise BadPolicySpec(f"{label!r} names no version")
    if version is None:
        raise BadPolicySpec(f"seat policy {label!r} needs the version it was playing")
    if label == "learned":
        return SeatPolicy("learned", served(version), record=record)
    if label.startswith("frozen@"):
        return SeatPolicy("frozen", served(version))
    if label in ("production", "canary:production"):
        return SeatPolicy("frozen", served(version), channel=label)
    raise BadPolicySpec(
        f"unknown seat policy {label!r}: resume with the labels the game's create answered"
    )


def search_label_spec(text: str) -> SearchSpec:
    """`croupier serve --search-labels`: a search seat's spec, its settings (BadPolicySpec, a
    ValueError, for anything else: the server does not start on it)."""
    spec = parse_spec(text)
    if spec.name != SEARCH or spec.search is None:
        raise BadPolicySpec(
            f"--search-labels needs a search seat's spec (search:...), got {text!r}"
        )
    return spec.search

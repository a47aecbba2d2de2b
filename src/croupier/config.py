"""The policy server's settings: one dataclass, filled from CLI flags (or by tests directly)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ServerConfig:
    game: str = "leduc-holdem"
    # For the `vector` game (and adapters that take sizes): observation and action sizes.
    obs_size: int | None = None
    num_actions: int | None = None
    num_players: int = 2
    # A rules policy named by import path (`pkg.mod:fn`, state -> engine action); overrides the
    # adapter's own (for the built-in games, RLCard's rule agents).
    rules: str | None = None
    # Seats not named in POST /v1/games get these policies, rotated one place per new game so
    # every policy plays every seat equally often.
    seat_mix: list[str] = field(default_factory=lambda: ["learned", "rules"])
    # "created": a learned seat keeps the version current when its game started;
    # "latest": it follows every new version.
    pin: str = "created"
    # Batching of learned-policy forwards.
    max_batch: int = 256
    max_wait_ms: float = 0.0
    forward_thread: bool = True
    # Batches at least this big run inline even with the thread (the loop is saturated then).
    forward_inline_from: int = 128
    # Weights versions kept in memory, and where each received version is written.
    keep_versions: int = 8
    # Experiments: serve the version this many places behind the newest (`bench lag`).
    behaviour_lag: int = 0
    weights_dir: Path | None = None
    # The server's data directory: the episode spool (spool.sqlite3) and, unless weights_dir
    # says otherwise, received weights (weights/). None: both in memory only.
    data_dir: Path | None = None
    # Finished episodes waiting for the trainer (oldest dropped, counted, past either bound).
    outbox_max_episodes: int = 50_000
    spool_max_bytes: int = 1 << 30
    # Games remembered after they end (to answer 409 instead of 404).
    ended_games_remembered: int = 100_000
    # Trainer link: host:port, or None to serve without training.
    trainer: str | None = None
    ship_max_steps: int = 512
    ship_max_seconds: float = 0.5
    # The link's shared secret (never sent: both ends prove they hold it, and every frame is
    # MACed with it; see link/auth.py); None: an unauthenticated link, for loopback.
    link_token: str | None = None
    # Accept RLlib's stock EnvRunnerServerForExternalInference (it sends a pickled config).
    rllib_compat: bool = False
    # Let --rllib-compat unpickle a trainer's config from a non-loopback address (trusted
    # networks only: whoever answers there can run code in this process).
    rllib_compat_allow_remote: bool = False
    # FastAPI's native OpenTelemetry (traces/metrics/logs to the globally configured providers).
    opentelemetry: bool = False
    # API keys (see croupier.api.auth): none configured = an open server.
    api_keys: list[str] = field(default_factory=list)
    admin_keys: list[str] = field(default_factory=list)
    # Read-only keys: the dashboard's data and arena results, nothing else.
    read_keys: list[str] = field(default_factory=list)
    # Idempotent decisions and fallback: a learned decision not ready within this deadline (or
    # failed) is answered by the fallback policy ("rules", or "random" where a game has none).
    decide_deadline_ms: float | None = 1000.0
    fallback: str = "rules"
    # Limits: request bodies (413), games in flight and decisions waiting for the model (503
    # with Retry-After past either), idle games aborted after this many seconds (None: never).
    max_body_bytes: int = 4 << 20  # a full decide:batch (4096 items) fits
    max_games: int = 100_000
    # Games in flight per API key (429 + Retry-After past it), so one engine cannot take all
    # of `max_games`; None: no per-key cap. Needs keys (an open server has one client).
    max_games_per_key: int | None = None
    max_queued_decisions: int = 10_000
    idle_game_timeout_s: float | None = 600.0
    retry_after_s: int = 1
    # Arena results (JSON lines) behind the dashboard's learning curve; see dashboard/arena.py.
    arena_results: Path | None = None
    # Rollout (policies/rollout.py): the share of new games whose `canary` seats get the
    # production version (the rest get the rules), and where `record: rules` games' rules
    # decisions are written as offline episodes (None: such games are refused).
    canary_share: float = 0.0
    offline_dir: Path | None = None
    seed: int = 0

    def resolved_weights_dir(self) -> Path | None:
        if self.weights_dir is not None:
            return self.weights_dir
        return self.data_dir / "weights" if self.data_dir is not None else None

    def spool_path(self) -> Path | None:
        return self.data_dir / "spool.sqlite3" if self.data_dir is not None else None

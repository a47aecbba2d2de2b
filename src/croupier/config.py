"""The policy server's settings, each defined once: `ServerConfig` (what the app is built from;
tests construct it directly) and `ServeProcess` (what only the `croupier serve` process needs:
address, TLS, logging). `croupier serve`'s flags, their help and environment variables, and
docs/settings.md are generated from these fields (see croupier/settings.py).

Why ~545 lines in one module: every setting of `serve` and `train` is defined here once, with
its help; split by command, the settings both share (keys, the link token) would be defined
twice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croupier.settings import setting


def _zero_is_none(value: Any, _values: dict[str, Any]) -> Any:
    return value or None


def _none_is_zero(value: Any) -> Any:
    return 0 if value is None else value


def _seat_mix(text: str, _values: dict[str, Any]) -> list[str]:
    from croupier.policies.seats import parse_seat_mix

    return parse_seat_mix(text)


def _payoff_range(text: str | None, _values: dict[str, Any]) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--payoff-range must be LOW,HIGH (two numbers), got {text!r}") from None
    return low, high


def _keys(text: str | None, _values: dict[str, Any]) -> list[str]:
    from croupier.api.auth import parse_keys

    return parse_keys(text)


def _allowed_hosts(text: str | None, values: dict[str, Any]) -> list[str] | None:
    """The Host names to answer; not given: the loopback names on a loopback --host (a page
    elsewhere cannot drive this server through DNS rebinding), any elsewhere; `*`: any."""
    from croupier.api.hosts import is_loopback, loopback_hosts

    if text is None:
        host = values.get("host", "127.0.0.1")
        return loopback_hosts(host) if is_loopback(host) else None
    names = [name.strip() for name in text.split(",") if name.strip()]
    return None if "*" in names else names


def _data_dir(text: str, values: dict[str, Any]) -> Path | None:
    return None if text.lower() == "none" else Path(text.format(port=values["port"]))


def _keys_setting(help: str, env: str) -> Any:
    """A comma-separated list of bearer keys, from a flag or the environment."""
    return setting([], help, env=env, cli_type=str | None, cli_default=None, from_cli=_keys)


def _link_token_setting() -> Any:
    """Where the link's shared secret is: the same setting on both ends (`serve`, `train`).
    Only the file's path is a setting: the token itself never enters a config (the trainer's
    is pickled into every checkpoint and sent to every Ray actor), see link/secret.py."""
    return setting(
        None,
        "File holding the trainer link's shared secret (at least 16 random bytes' worth: "
        "python -c 'import secrets; print(secrets.token_urlsafe(32))'); without it the "
        "CROUPIER_LINK_TOKEN environment variable is read; neither: an unauthenticated link, "
        "for loopback",
        env="CROUPIER_LINK_TOKEN_FILE",
    )


_MB = 1024 * 1024


@dataclass
class ServerConfig:
    game: str = setting(
        "leduc-holdem", "leduc-holdem, uno, doudizhu, vector, or your adapter as pkg.module:Adapter"
    )
    obs_size: int | None = setting(None, "vector game: observation size")
    num_actions: int | None = setting(None, "vector game: action count")
    num_players: int = setting(2, "Players per game")
    payoff_range: tuple[float, float] | None = setting(
        None,
        "LOW,HIGH: every payoff your engine can end a game with, replacing the game's declared "
        "range (a built-in game scored your engine's way); `end` refuses payoffs outside it and "
        "`decide` larger rewards (422)",
        cli_type=str | None,
        cli_default=None,
        from_cli=_payoff_range,
    )
    rules: str | None = setting(
        None,
        "Your rules policy: pkg.module:function(state) -> action (overrides the adapter's own; "
        "for the built-in games, RLCard's rule agents)",
    )
    # Rotated one place per new game so every policy plays every seat equally often.
    seat_mix: list[str] = setting(
        ["learned", "rules"],
        "Seat mix for seats a game does not name, e.g. learned,rules",
        flag="seats",
        cli_type=str,
        to_cli=",".join,
        from_cli=_seat_mix,
    )
    pin: str = setting(
        "created",
        "created (a learned seat keeps the version current when its game started) | latest "
        "(it follows every new version)",
    )
    max_batch: int = setting(256, "Most learned decisions in one forward")
    onnx_forward: bool = setting(
        True,
        "A candidate game's forward in ONNX Runtime when installed and it reproduces the "
        "module's scores (~2x less CPU; policies/onnx_scorer.py), else torch (--no-onnx-forward)",
    )
    max_wait_ms: float = setting(0.0, "How long a batch waits for more decisions")
    forward_thread: bool = setting(
        True,
        "Run batched forwards on a thread of their own (the default) or inline on the event "
        "loop (--no-forward-thread)",
    )
    forward_inline_from: int = setting(
        128,
        "Batches at least this big run inline even with the forward thread: a queue that long "
        "means a saturated event loop, where the thread's round trip costs more",
    )
    # A candidate game's only: with 64 for every game, doudizhu at think 100 spent 2.5-3.8%
    # less server CPU a learned decision, leduc saturated the same CPU a decision but 6-10%
    # fewer decisions/s served beside the build without (docs/performance.md).
    forward_thread_from_candidates: int = setting(
        64,
        "A candidate game's batches with fewer candidates than this run inline even with the "
        "forward thread: a forward that small costs less than the thread's round trip",
    )
    keep_versions: int = setting(
        8, "Weights versions kept in memory (besides production, its history and live games')"
    )
    # Live games pin versions (`pin: created`, `frozen@N`); an engine keeping one game open per
    # new version made a server hold 302 versions (~1.8 MiB each for doudizhu). Normal play
    # pins a handful (a game spans p90 ~1 pushed version, docs/off-policy.md); 32 leaves room
    # for long games under APPO's several pushes a second and holds at most ~58 MiB of
    # doudizhu versions for them. A pin past it is served by the oldest kept version after it.
    max_pinned_versions: int = setting(
        32,
        "Weights versions kept for live games' pins (the newest N pinned); older pins are "
        "served by the nearest newer version kept",
    )
    weights_keep_last: int = setting(
        8,
        "Weights files kept in --weights-dir: the newest N (besides production, every "
        "promoted version and every version a live game is pinned to)",
    )
    weights_keep_every: int = setting(
        0,
        "Also keep one weights file per N version numbers in --weights-dir (0: none): a "
        "history of the whole run",
    )
    behaviour_lag: int = setting(
        0, "Experiments: serve the version N places behind the newest (`bench lag`)"
    )
    weights_dir: Path | None = setting(
        None, "Where received versions go (default: the data dir's weights/)"
    )
    # None: the spool and the weights in memory only.
    data_dir: Path | None = setting(
        None,
        "Episode spool (SQLite) and received weights; '{port}' is replaced by the port; 'none' "
        "keeps both in memory",
        cli_type=str,
        cli_default="croupier-data/{port}",
        from_cli=_data_dir,
    )
    # Finished episodes waiting for the trainer (oldest dropped, counted, past either bound).
    outbox_max_episodes: int = setting(
        50_000,
        "Episodes waiting for the trainer; past it the oldest are dropped",
        flag="spool-max-episodes",
    )
    spool_max_bytes: int = setting(
        1 << 30,
        "Spool size in MB; past it the oldest episodes are dropped",
        flag="spool-max-mb",
        cli_type=float,
        to_cli=lambda b: b / _MB,
        from_cli=lambda mb, _v: int(mb * _MB),
    )
    # What learned seats' recorders may hold in memory until their games end. A seat's
    # episode: 16 MiB is ~60x the largest seen in random play (doudizhu 260-269 KB, UNO 260 KB,
    # 300 hands each, `python -m experiments.guards`) and a quarter of the link's 64 MiB frame, so
    # every episode recorded can be shipped. All recording: 512 MiB holds ~4,500 doudizhu
    # seats' episodes of the mean size (~117 KB) at once. Past either a learned seat still
    # answers, but the step is not recorded (its episode ends there, truncated).
    record_max_episode_bytes: int = setting(
        16 * _MB,
        "Memory one learned seat's episode may hold, in MB; a step past it is not recorded "
        "(the episode so far ends truncated)",
        flag="record-max-episode-mb",
        cli_type=float,
        to_cli=lambda b: b / _MB,
        from_cli=lambda mb, _v: int(mb * _MB),
    )
    record_max_total_bytes: int = setting(
        512 * _MB,
        "Memory all learned seats' episodes in flight may hold, in MB; a step past it is not "
        "recorded (its episode so far ends truncated)",
        flag="record-max-total-mb",
        cli_type=float,
        to_cli=lambda b: b / _MB,
        from_cli=lambda mb, _v: int(mb * _MB),
    )
    ended_games_remembered: int = setting(
        100_000, "Games remembered after they end (409 instead of 404)", cli=False
    )
    trainer: str | None = setting(None, "Trainer link host:port (none: serve without training)")
    ship_max_steps: int = setting(512, "Link: most steps per shipped batch", cli=False)
    ship_max_seconds: float = setting(0.5, "Link: longest wait before shipping", cli=False)
    # Never sent: both ends prove they hold it, and every frame is MACed (see link/auth.py).
    link_token_file: Path | None = _link_token_setting()
    rllib_compat: bool = setting(
        False,
        "Talk to RLlib's stock EnvRunnerServerForExternalInference (it sends a pickled config: "
        "trusted networks only, see docs/security.md)",
    )
    rllib_compat_allow_remote: bool = setting(
        False,
        "Let --rllib-compat unpickle the config of a trainer it cannot check: one not on "
        "loopback, or one whose process is not this server's user's (whoever answers at "
        "--trainer can run code here)",
    )
    # API keys (see croupier.api.auth): none configured = an open server.
    api_keys: list[str] = _keys_setting("Comma-separated engine bearer keys", "CROUPIER_API_KEYS")
    admin_keys: list[str] = _keys_setting(
        "Comma-separated admin bearer keys", "CROUPIER_ADMIN_KEYS"
    )
    read_keys: list[str] = _keys_setting(
        "Comma-separated read-only keys: dashboard data and arena results only",
        "CROUPIER_READ_KEYS",
    )
    # None: any Host (what tests and code building the app directly get); `croupier serve`
    # on a loopback --host answers only the loopback names (api/hosts.py).
    allowed_hosts: list[str] | None = setting(
        None,
        "Host header names this server answers, comma-separated ('*': any). Default: on a "
        "loopback --host, localhost, 127.0.0.1 and ::1 only (so a web page elsewhere cannot "
        "drive it through DNS rebinding); on any other address, any",
        cli_type=str | None,
        cli_default=None,
        from_cli=_allowed_hosts,
    )
    # The fallback policy is "rules", or "random" where a game has none.
    decide_deadline_ms: float | None = setting(
        1000.0,
        "Learned decisions later than this (or failed) get the fallback; 0: off",
        cli_type=float,
        to_cli=_none_is_zero,
        from_cli=_zero_is_none,
    )
    fallback: str = setting("rules", "rules | random")
    rules_before_first_version: bool = setting(
        True,
        "With --trainer and a game with rules: the rules answer the model seats while this "
        "server holds only its own untrained version 0 (until the trainer's first version), "
        "unrecorded; --no-rules-before-first-version serves and records version 0",
    )
    max_body_bytes: int = setting(
        4 << 20,  # a full decide:batch (4096 items) fits
        "Larger request bodies (in KB) get 413",
        flag="max-body-kb",
        cli_type=float,
        to_cli=lambda b: b / 1024,
        from_cli=lambda kb, _v: int(kb * 1024),
    )
    max_games: int = setting(100_000, "Games in flight; more get 503")
    # So one engine cannot take all of `max_games`. Needs keys (an open server has one client).
    max_games_per_key: int | None = setting(
        None,
        "Games in flight per API key; more get 429 (0: no cap)",
        cli_type=int,
        to_cli=_none_is_zero,
        from_cli=_zero_is_none,
    )
    max_queued_decisions: int = setting(10_000, "Decisions waiting for the model; more get 503")
    idle_game_timeout_s: float | None = setting(
        600.0,
        "Abort games idle this long; 0: never",
        cli_type=float,
        to_cli=_none_is_zero,
        from_cli=_zero_is_none,
    )
    retry_after_s: int = setting(1, "Retry-After of a 503 or 429", cli=False)
    arena_results: Path | None = setting(
        None, "Arena results file (JSON lines) for the dashboard (see dashboard/arena.py)"
    )
    # Rollout (policies/rollout.py): the rest of the canary games get the rules.
    canary_share: float = setting(0.0, "Share of new games whose `canary` seats get production")
    # League seats (policies/rollout/league.py): the opponents a league training run meets.
    league_sampling: str = setting(
        "recent",
        "What a `league` seat plays: recent (half the time one of the newest 4 versions, half "
        "one of the 2 strongest by the last league's ratings) | fsp (any loaded version, "
        "uniformly: fictitious play over the run's history, kept by --league-every)",
    )
    league_every: int = setting(
        0,
        "Also keep one version per N version numbers in memory (0: none): the history "
        "`league` seats draw from",
    )
    league_rules_share: float = setting(
        0.0, "Share of `league` seats the game's rules play instead of a version"
    )
    league_best_response_share: float = setting(
        0.0,
        "Share of `league` seats the exact best response to the newest version plays instead "
        "(a game small enough to walk whole: Kuhn, Leduc)",
    )
    # Search seats (`search:…`, policies/search_pool.py): started at the first game seating one.
    search_workers: int = setting(
        0,
        "Workers searching for `search:…` seats, each one core with its own table of the game "
        "(0: one per CPU core here, or per CPU of the --search-address cluster)",
    )
    search_address: str | None = setting(
        None,
        "A Ray cluster's address (auto, ray://HOST:PORT): search seats search on Ray actors "
        "there instead of this machine's processes (more machines, more search)",
    )
    # Expert iteration (docs/search.md, trainer/distill.py): a search labels a share of the
    # learned seats' recorded decisions with its choice; the seat still plays its own move.
    search_labels: str | None = setting(
        None,
        "A search seat spec (search:base=rules:rollouts=N:ms=D) that labels a share of the "
        "learned seats' recorded decisions with its choice, for the trainer's distillation "
        "term (expert iteration); the label joins its step when the search answers (ms at "
        "most), the seat playing its own move meanwhile",
    )
    search_label_share: float = setting(
        0.25, "Share of the learned seats' recorded decisions --search-labels labels"
    )
    # A search over the rules keeps the rules' move wherever no other beats it beyond
    # chance (~96% of the searches while training on OpenSpiel's Hearts): such labels teach the
    # rules, which PPO is there to move past. Departures alone carry what the search adds.
    search_label_departures: bool = setting(
        False,
        "Label only the decisions where the search's choice departs from its base policy's "
        "move (what the search adds), not those where it kept the base's",
    )
    # None: `record: rules` games are refused.
    offline_dir: Path | None = setting(
        None, "Where `record: rules` games' rules decisions are written as offline episodes"
    )
    # The same default bound as the spool's: rules games recorded without end must not fill
    # the disk; the oldest files go first, counted (`offline.files_dropped`, /v1/rollout).
    offline_max_bytes: int = setting(
        1 << 30,
        "Size of --offline-dir's files in MB; past it the oldest are deleted",
        flag="offline-max-mb",
        cli_type=float,
        to_cli=lambda b: b / _MB,
        from_cli=lambda mb, _v: int(mb * _MB),
    )
    opentelemetry: bool = setting(
        False, "FastAPI's native OpenTelemetry (off: it costs ~7% per request)"
    )
    seed: int = setting(0, "Random seed")

    def resolved_weights_dir(self) -> Path | None:
        if self.weights_dir is not None:
            return self.weights_dir
        return self.data_dir / "weights" if self.data_dir is not None else None

    def spool_path(self) -> Path | None:
        return self.data_dir / "spool.sqlite3" if self.data_dir is not None else None


@dataclass
class ServeProcess:
    """`croupier serve`'s settings that are not the app's: where it listens, TLS, logging."""

    host: str = setting("127.0.0.1", "Address to listen on")
    port: int = setting(8000, "Port to listen on")
    ssl_certfile: Path | None = setting(None, "Serve HTTPS: the server's certificate chain (PEM)")
    ssl_keyfile: Path | None = setting(None, "Serve HTTPS: the certificate's private key (PEM)")
    ssl_keyfile_password: str | None = setting(
        None, "The private key's password", env="CROUPIER_SSL_KEYFILE_PASSWORD"
    )
    ssl_ca_certs: Path | None = setting(
        None, "With --ssl-certfile: CA bundle; clients must present a certificate"
    )
    keep_alive_s: float = setting(
        75.0,
        "Idle keep-alive connections are closed after this long (uvicorn's 5 s default races "
        "busy clients reusing a connection: resets)",
    )
    log_level: str = setting("warning", "debug | info | warning | error")
    profile_stages: Path | None = setting(
        None,
        "Time each stage of a decision (parse, encode, forward, ...) in thread CPU and write "
        "the totals to this JSON file on each SIGUSR1 (`croupier bench serve` reads it; ~20 "
        "us a decision: croupier/stages.py)",
    )
    event_loop: str = setting(
        "uvloop",
        "uvloop (~2x the decisions/s) | asyncio (saturated by no-model seats, no ~1 s p99 "
        "tail, at about half the throughput; docs/performance.md)",
    )


@dataclass
class TrainSettings:
    """`croupier train`'s settings: its flags, help and environment variables
    (`cli/training.py` builds the trainer's `TrainOptions` and `Hyper` from them; `None`
    hyperparameters keep the algorithm's defaults, `Hyper.defaults(algo)`)."""

    game: str = setting(
        "leduc-holdem",
        "leduc-holdem, uno, doudizhu, vector, or your adapter as pkg.module:Adapter",
    )
    algo: str | None = setting(
        None, "ppo or appo (V-trace); default: the game's preset (its adapter's `preset`), else ppo"
    )
    preset: Path | None = setting(
        None,
        "A preset JSON file (`croupier tune` writes one) in place of the game's preset; the "
        "flags below still override its fields",
    )
    listen: str = setting("127.0.0.1:5555", "host:port policy servers connect to")
    checkpoint_dir: Path = setting(Path("runs/trainer"), "Checkpoints; resumes if present")
    minutes: float | None = setting(None, "Stop after this long")
    iterations: int | None = setting(None, "Stop after this many")
    ray_address: str | None = setting(None, "An existing Ray cluster")
    max_version_lag: int | None = setting(
        None, "Drop episodes played more than this many versions behind the newest"
    )
    link_token_file: Path | None = _link_token_setting()
    insecure: bool = setting(
        False,
        "Listen on a non-loopback --listen without a link token (anyone reaching the port can "
        "send episodes and take the weights; see docs/security.md)",
    )
    # Hyperparameters left unset take the game's preset (games/presets.py; doudizhu: lr 1e-3,
    # batch 1024, minibatch 256, MLP 128x128, scorer 64), else the algorithm's defaults.
    lr: float | None = setting(None, "Default: the game's preset, else ppo 5e-4, appo 1e-3")
    train_batch_size: int | None = setting(
        None, "Default: the game's preset, else ppo 4000, appo 128"
    )
    minibatch_size: int | None = setting(None, "PPO; default: the game's preset, else 500")
    num_epochs: int | None = setting(
        None, "PPO; default: the game's preset, else 2 for scored candidates, 4 otherwise"
    )
    gamma: float | None = setting(None, "Discount; default: the game's preset, else 1.0")
    max_sample_batches: float | None = setting(
        None,
        "Most train batches of the newest steps one update takes (older surplus dropped); "
        "default: ppo 2, appo no cap; 0: no cap",
    )
    entropy_coeff: float | None = setting(None, "Default: the game's preset, else 0.01")
    kl_target: float | None = setting(
        None,
        "PPO: a KL penalty between the policy before and after each update, its coefficient "
        "adapted toward this mean KL (RLlib's kl_target); default 0: off, the clip alone",
    )
    distill_coeff: float | None = setting(
        None,
        "Expert iteration: the weight of the cross-entropy toward a search's labels, on the "
        "steps a search labelled (docs/search.md); default 0.5; 0: off",
    )
    hiddens: str | None = setting(
        None, "Hidden layer sizes, e.g. 128,128; default: the game's preset, else 128,128"
    )
    score_hidden: int | None = setting(
        None, "Candidate games (doudizhu): the move scorer's width; default: the preset's, else 64"
    )
    checkpoint_every: int = setting(10, "Checkpoint every this many iterations")
    num_env_runners: int = setting(0, "RLlib env runners besides the local one")
    num_learners: int = setting(0, "RLlib learner actors (0: learn in the main process)")
    num_gpus_per_learner: float = setting(
        0, "GPUs per learner (needs GPU nodes and a CUDA torch there; untested here)"
    )
    # Where Ray places the actors: a custom resource only some nodes have (`ray start
    # --resources '{"croupier_runner": 1}'`) pins runners to those nodes, one per unit, which
    # is how a runner's listen port lands on a node its servers can reach (docs/scale-out.md).
    env_runner_resources: str | None = setting(
        None,
        "Custom Ray resources each env runner needs, as JSON, e.g. '{\"croupier_runner\": 1}'",
    )
    learner_resources: str | None = setting(
        None, "Custom Ray resources each learner needs, as JSON (places learners on nodes)"
    )
    obs_size: int | None = setting(None, "vector game: observation size")
    num_actions: int | None = setting(None, "vector game: action count")
    metrics_port: int | None = setting(None, "Serve Prometheus /metrics on this port")
    metrics_host: str = setting("127.0.0.1", "Address for --metrics-port")
    init_weights: Path | None = setting(None, "Start from a `croupier pretrain` output dir")
    # Rules-anchored learning (trainer/rules_anchor.py, docs/training.md); the defaults are
    # `RulesAnchor`'s, chosen by `python -m experiments.rules_anchor`.
    rules_anchor: bool = setting(
        True,
        "A first start (no checkpoint, no --init-weights) of a game with a rules bot and a "
        "simulator starts from the rules' clone, and learning is held near it by a decaying "
        "KL term; --no-rules-anchor: start untrained, no KL term",
    )
    clone_decisions: int = setting(
        20_000, "Rules-vs-rules decisions the clone is distilled from first (whole hands)"
    )
    clone_max_decisions: int = setting(
        160_000,
        "The most decisions the clone's budget doubles to while it still misses the rules' "
        "moves on fresh decisions (at most --clone-decisions: no growth)",
    )
    clone_smoothing: float | None = setting(
        None,
        "The clone's label smoothing: the share of its target spread over the legal moves "
        "(default: 0.01 for a fixed head of more than 16 moves, 0.05 for fewer or scored "
        "candidates)",
    )
    clone_value: bool = setting(
        True,
        "Fit the clone's value head (the critic training starts from) to the rules' returns; "
        "--no-clone-value: to their mean alone",
    )
    rules_kl: float = setting(
        0.05, "The KL(clone || policy) coefficient at the start (0: the clone, no pull back)"
    )
    rules_entropy_boost: float | None = setting(
        None,
        "An entropy bonus over the algorithm's own at the start, to explore from the clone "
        "(default: 0.1 for a fixed head of at most 16 moves, 0 for more or scored candidates)",
    )
    rules_anchor_half_life: float = setting(
        200_000.0,
        "Env steps trained over which the KL coefficient and the entropy bonus halve (0: never)",
    )
    rules_anchor_release: bool = setting(
        True,
        "Drop the KL term and the entropy bonus for good once the policy's returns beat the "
        "clone's values (the rules' own) significantly, over the last 5 updates",
    )
    rules_anchor_pull_back: bool = setting(
        True,
        "While the policy's returns are significantly below the clone's values (the rules' "
        "own) over the last 5 updates, the half-life clock stands still and goes back: the KL "
        "coefficient doubles an update, up to --rules-anchor-max-pull times its start",
    )
    rules_anchor_max_pull: float = setting(
        32.0, "The most the pull back makes of the KL coefficient, as a multiple of --rules-kl"
    )
    max_idle: str = setting(
        "none",
        "Without episodes this long (900, 15m, 2h) checkpoint and stop; 0 or none: wait for "
        "games forever",
    )
    idle_after: float = setting(30.0, "Seconds without episodes before reporting idle")
    max_sample_lag: int | None = setting(
        None,
        "Drop waiting episodes more versions behind than this when sampled (a backlog's "
        "staleness bound); default: ppo 32, appo none; -1: none",
    )
    fresh_lag: int | None = setting(
        None,
        "An update needs episodes played within this many versions: a backlog alone waits for "
        "fresh games instead of being trained on its own; default: ppo 2, appo none; -1: none",
    )
    stop_grace: float = setting(60.0, "Seconds after SIGTERM/SIGINT to checkpoint and exit")
    update_sleep: float = setting(
        0.0,
        "Benchmarks only: seconds the learner sleeps after each update, a learner slower than "
        "the games on purpose (`croupier bench overload`); 0 in any real run",
    )
    log_level: str = setting("warning", "debug | info | warning | error")

"""The composition root: every long-lived part of a policy server built in one place, injected
into what uses it, and started and stopped in order.

Built (`build_components`): adapter → weights versions → batcher → spool → rollout (channels,
canary, shadow through the batcher, offline writer) → decision service. Started (`start`):
warm-up forward, batcher, trainer link, idle-game expiry. Stopped (`stop`) in reverse: expiry,
link, batcher, then the offline writer flushed and the spool closed, so nothing that could
still write to them is running.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from croupier.config import ServerConfig
from croupier.games.base import GameAdapter
from croupier.games.candidates import is_candidate_game
from croupier.games.registry import load_adapter, load_rules
from croupier.policies.best_response import BestResponseSeat
from croupier.policies.learned import PolicyVersions
from croupier.policies.retention import Retention
from croupier.policies.rollout import Channels, LeagueSampling, Rollout
from croupier.policies.search_pool import SearchSeats
from croupier.policies.seats import search_label_spec
from croupier.sessions.batcher import InferenceBatcher
from croupier.sessions.expiry import expire_idle_games
from croupier.sessions.service import DecisionService
from croupier.trajectories.offline import OfflineWriter
from croupier.trajectories.spool import EpisodeSpool

if TYPE_CHECKING:
    from croupier.link.client import TrainerLink


@dataclass
class Components:
    config: ServerConfig
    adapter: GameAdapter
    versions: PolicyVersions
    batcher: InferenceBatcher
    outbox: EpisodeSpool
    offline: OfflineWriter | None
    rollout: Rollout
    service: DecisionService
    link: TrainerLink | None = None  # connected at `start`, with --trainer
    _expiry: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self) -> None:
        self.service.warm_up()
        await self.batcher.start()
        if self.config.trainer:
            from croupier.link.client import TrainerLink  # only a server with a trainer

            self.link = TrainerLink(self.config, self.versions, self.outbox)
            self.link.start()
        if self.config.idle_game_timeout_s is not None:
            self._expiry = asyncio.create_task(
                expire_idle_games(self.service, self.config.idle_game_timeout_s)
            )

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
            self._expiry = None
        if self.link is not None:
            self.link.stop()
        await self.batcher.stop()
        if self.offline is not None:
            self.offline.flush()
        self.rollout.live.save()
        if self.service.search is not None:
            self.service.search.close()
        self.outbox.close()


def build_components(config: ServerConfig) -> Components:
    adapter = load_adapter(
        config.game,
        obs_size=config.obs_size,
        num_actions=config.num_actions,
        num_players=config.num_players,
        payoff_range=config.payoff_range,
    )
    if config.offline_dir and is_candidate_game(adapter):
        # Offline (Parquet) episodes hold fixed-size masks; candidate lists are ragged.
        raise ValueError(f"--offline-dir is for games of fixed-size actions, not {config.game}")
    weights_dir = config.resolved_weights_dir()
    versions = PolicyVersions(
        adapter,
        keep=config.keep_versions,
        weights_dir=weights_dir,
        seed=config.seed,
        behaviour_lag=config.behaviour_lag,
        retention=Retention(config.weights_keep_last, config.weights_keep_every),
        max_pinned=config.max_pinned_versions,
        onnx_forward=config.onnx_forward,
        history_every=config.league_every,
    )
    batcher = InferenceBatcher(
        versions,
        config.max_batch,
        config.max_wait_ms,
        config.forward_thread,
        forward_inline_from=config.forward_inline_from,
        forward_thread_from_candidates=config.forward_thread_from_candidates,
        deadline_s=config.decide_deadline_ms / 1000.0 if config.decide_deadline_ms else None,
    )
    outbox = EpisodeSpool(
        config.spool_path(),
        config.outbox_max_episodes,
        config.spool_max_bytes,
        max_episode_bytes=_largest_episode_bytes(config),
    )
    offline = (
        OfflineWriter(
            config.offline_dir,
            adapter.terminal_observation(),
            max_bytes=config.offline_max_bytes,
        )
        if config.offline_dir
        else None
    )
    rollout = Rollout(
        Channels(versions, weights_dir),
        batcher,  # shadow seats' learned versions run through it
        config.canary_share,
        weights_dir,
        offline,
        config.seed,
        league=LeagueSampling(
            config.league_sampling, config.league_rules_share, config.league_best_response_share
        ),
        best_response=BestResponseSeat(config.game, adapter, versions),
    )
    # The decider checks every state before a rules seat acts (`checked_rules`); a user's own
    # rules file is given the checked state too.
    rules = load_rules(config.rules) if config.rules else adapter.checked_rules()
    # Search seats' workers: nothing runs until a game seats one (`SearchSeats.admit`).
    search = SearchSeats(
        config.game,
        config.search_workers,
        config.search_address,
        rules_path=config.rules,
        has_rules=rules is not None,
        weights_dir=weights_dir,
    )
    if config.search_labels is not None:  # expert iteration: refuse to start on a bad spec
        problem = search.problem(search_label_spec(config.search_labels))
        if problem is not None:
            raise ValueError(f"--search-labels: {problem}")
    service = DecisionService(config, adapter, versions, batcher, outbox, rollout, rules, search)
    versions.in_use = service.games.versions_in_use  # retention keeps what live games pin
    return Components(config, adapter, versions, batcher, outbox, offline, rollout, service)


def _largest_episode_bytes(config: ServerConfig) -> int | None:
    """What the trainer link can ship as one episode (None without a trainer: nothing ships,
    so only the spool's byte bound limits an episode)."""
    if not config.trainer:
        return None
    from croupier.link.client import largest_episode_bytes  # only a server with a trainer

    return largest_episode_bytes()


def build_service(config: ServerConfig) -> DecisionService:
    """The decision service alone, with everything it needs (nothing started)."""
    return build_components(config).service

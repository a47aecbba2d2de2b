"""The rules' clone: the trainer's first version, and what the rules anchor measures against.

A learned seat plays real players from its first hand, so it must not start as a random
player. The clone (`distil`): the rules play the rules in-process through the game's
simulator (any game with a simulator and a rules bot: `anchorable`); every decision is
encoded by the game's adapter exactly as the server encodes it, and the network that is
served (the masked actor-critic or the candidate scorer, same class) is fitted to the rules'
action by cross-entropy with label smoothing (so the clone keeps some entropy to explore
from) and its value head to the hand's payoff (so PPO's first advantages are not noise: an
untrained value head was half of why the sharp clone of `croupier pretrain` learned slower
after). Nothing is served or recorded: no server is needed. It becomes the trainer's first
version.

Then its checks on fresh hands of the rules, which the anchor's judge
(`rules_anchor.Release`) reads the policy's gains against: its value's offset and scale at a
seat's first decision (`first_step_offset`), its own level playing a team against the rules
(`clone_level`), and how closely it follows them (`clone_fit`).

Why these choices, with the measured numbers: docs/training.md, "Rules-anchored learning".
Why ~510 lines in one module: the clone's making read in the order it happens (the rules'
decisions recorded, the fit, its budget grown by its misses on fresh decisions, its checks),
each step reading the one before's `Decisions`; apart, a reader would chase one record
format through several files.
Why apart from the anchor (`trainer/rules_anchor.py`, the pull back toward this clone while
the policy learns): one job a module; the clone is made once, before any learner exists.
Its settings are the anchor's (`RulesAnchor`: one `croupier train --rules-anchor ...`), of
which `distil` reads three fields and its report keeps all; imported for the type only, so
this module does not load RLlib's learners.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from torch.nn import functional as F

from croupier.games.candidates import is_candidate_game
from croupier.policies.distribution import from_module, sampler
from croupier.policies.module import ModelSpec

if TYPE_CHECKING:
    from croupier.games.base import GameAdapter
    from croupier.trainer.rules_anchor import RulesAnchor

# A deviation from the rules now and then while recording, so the clone also sees states the
# rules alone never reach (the learner's own mistakes lead there); the label stays the rules'.
DEVIATE = 0.1
# The clone's value at a seat's first decision is checked on fresh hands of the rules (first
# steps only, a fifth of the clone's decisions): fitted on a few hundred hands, it was off by
# -0.044 ± 0.035 (UNO) and +0.027 ± 0.019 (crazy eights) on 3,000 fresh first steps, as large
# as the gains the anchor judges; the gain is read less that offset.
CALIBRATION_SHARE = 5
# The most the clone's value is scaled by in the gain (`first_step_offset`): a value fitted
# too flat is scaled up to what it tracks, a value of a few rows' noise not without bound.
MAX_VALUE_SCALE = 2.0
MAX_DECISIONS_PER_HAND = 10_000
# The clone's budget grows by its fit, not by the game (`grow_clone`): it doubles its
# decisions while, on fresh decisions of the rules (`HELD_OUT` of them, the rules' own
# states), it misses the rules' move more often than the rules miss themselves (a bot that
# draws at random, as UNO's, disagrees with itself) by over `CLONE_MISS_TOLERANCE`, and the
# last doubling cut those misses by more than their noise. OpenSpiel's Hearts with a slot
# per card, its clone at minute 0 through the path (sampled, 100 duplicate hands): fitted on
# 20,000 decisions it missed 10.5% of fresh ones and started -0.045 ± 0.037 a hand below its
# bot; grown to 80,000, 3.8% and -0.030 ± 0.028; to 160,000, 1.4% and -0.017 ± 0.016 (greedy
# it is the bot; sampled, the label smoothing costs the rest). Its candidates' clone missed
# 2.3% and started level (-0.005 ± 0.006 sampled over 2,000 hands in-process). Others after
# 20,000: crazy eights' slot per card 4.4%, limit hold'em 2.2%, president 1.2%, leduc 0.
HELD_OUT = 4_000
CLONE_MISS_TOLERANCE = 0.02


def anchorable(game: str, adapter: Any = None) -> str | None:
    """None if `game` can start from its rules (a rules bot and a simulator), else why not."""
    from croupier.games.registry import load_adapter, load_simulator

    adapter = adapter or load_adapter(game)
    if adapter.rules() is None:
        return f"{adapter.name} has no rules bot"
    try:
        load_simulator(game)
    except ValueError as e:
        return str(e)
    return None


# --- the rules' decisions ------------------------------------------------------------------


@dataclass
class Decisions:
    """The rules' decisions as the server encodes them: one row each."""

    obs: np.ndarray  # float32[N, obs_size]
    legal: list[np.ndarray]  # a mask float32[A] each, or a candidate game's features [K_i, F]
    actions: np.ndarray  # int64[N]: the rules' action index
    returns: np.ndarray  # float32[N]: the deciding seat's discounted payoff from there
    candidates: bool
    hands: int
    seconds: float
    # With a `player` (`rules_decisions`): the team it played, per row (`Simulator.teams`).
    teams: np.ndarray | None = None
    # With `ask_twice` (`rules_decisions`): the rules' action index when asked again.
    again: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)

    def __add__(self, other: Decisions) -> Decisions:
        """Both records' rows, this one's first (the teams and second answers dropped)."""
        return Decisions(obs=np.concatenate([self.obs, other.obs]),
                         legal=self.legal + other.legal,
                         actions=np.concatenate([self.actions, other.actions]),
                         returns=np.concatenate([self.returns, other.returns]),
                         candidates=self.candidates, hands=self.hands + other.hands,
                         seconds=self.seconds + other.seconds)  # fmt: skip


def rules_decisions(
    game: str,
    decisions: int,
    seed: int = 0,
    gamma: float = 1.0,
    deviate: float = DEVIATE,
    first_steps: bool = False,
    player: Callable[[dict[str, Any]], Any] | None = None,
    keep: float = 1.0,
    ask_twice: bool = False,
) -> Decisions:
    """The rules play the rules on `game`'s simulator until `decisions` decisions are made
    (the last hand played out); each seat's every decision is encoded by the game's adapter,
    labelled with the rules' action and the seat's payoff (discounted by its own later
    decisions, as the learner's episodes count them). `deviate`: the share of moves played
    at random instead (still labelled with the rules' move). `first_steps`: only each seat's
    first decision of a hand is kept (the hand still played out). `player` (a function of
    the state, as the rules are): it plays one team a hand, drawn at random, against the
    rules, and only its seats' decisions are kept, labelled with its own actions. `keep`: the
    share of the decisions kept, each drawn (the hands still played out), so that as many
    decisions come from 1 / `keep` times as many deals. `ask_twice`: the rules are asked each
    kept state again (`Decisions.again`), to tell how often a bot that draws disagrees with
    itself."""
    from croupier.games.base import rules_seeded
    from croupier.games.registry import load_adapter, load_simulator

    t0 = time.monotonic()
    table = load_simulator(game)
    adapter = load_adapter(game)
    rules = adapter.rules()
    if rules is None:
        raise ValueError(f"{adapter.name} has no rules bot to clone")
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    rng = np.random.default_rng(seed)
    obs_rows: list[np.ndarray] = []
    legal_rows: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[float] = []
    teams: list[int] = []
    again: list[int] = []
    hands = 0
    with rules_seeded(seed):
        while len(actions) < decisions:
            hands += 1
            if hands > 10 * decisions + 1000:  # bounded, even for a game of no decisions
                break
            table.reset(int(rng.integers(2**31)))
            team, played = -1, frozenset(range(table.num_players))  # whose decisions count
            if player is not None:
                sides = table.teams()
                team = int(rng.integers(len(sides)))
                played = frozenset(sides[team])
            rows_of: dict[int, list[tuple[int, int]]] = {}  # seat: (row, its decision index)
            made: dict[int, int] = {}  # seat: decisions made this hand
            for _ in range(MAX_DECISIONS_PER_HAND):
                if table.is_over():
                    break
                seat = table.current_player()
                state = table.state(seat)
                ours = seat in played
                action = player(state) if ours and player is not None else rules(state)
                made[seat] = made.get(seat, 0) + 1
                kept = keep >= 1.0 or rng.random() < keep  # (1: no draw, the same deals)
                if ours and (not first_steps or made[seat] == 1) and kept:
                    obs, legal = adapter.encode(state)
                    rows_of.setdefault(seat, []).append((len(actions), made[seat] - 1))
                    obs_rows.append(obs)
                    legal_rows.append(legal)
                    actions.append(adapter.action_index(action, state))
                    returns.append(0.0)
                    teams.append(team)
                    if ask_twice:
                        again.append(adapter.action_index(rules(state), state))
                if deviate > 0 and player is None and rng.random() < deviate:
                    options = state["legal_actions"]
                    action = options[int(rng.integers(len(options)))]
                table.step(action)
            else:
                raise RuntimeError(f"a hand of {adapter.name} ran past {MAX_DECISIONS_PER_HAND}")
            payoffs = table.payoffs()
            for seat, rows in rows_of.items():
                for row, k in rows:
                    returns[row] = float(payoffs[seat]) * gamma ** (made[seat] - 1 - k)
    return Decisions(
        obs=np.asarray(obs_rows, np.float32),
        legal=legal_rows,
        actions=np.asarray(actions, np.int64),
        returns=np.asarray(returns, np.float32),
        candidates=is_candidate_game(adapter),
        hands=hands,
        seconds=time.monotonic() - t0,
        teams=np.asarray(teams, np.int64) if player is not None else None,
        again=np.asarray(again, np.int64) if ask_twice else None,
    )


def _batch(data: Decisions, rows: np.ndarray) -> tuple[dict[str, Any], torch.Tensor]:
    """A module batch of `rows` (candidate rows padded to the batch's longest list) and the
    legal-action mask of its slots."""
    obs = torch.from_numpy(data.obs[rows])
    if not data.candidates:
        mask = torch.from_numpy(np.stack([data.legal[i] for i in rows]))
        return {Columns.OBS: {"observations": obs, "action_mask": mask}}, mask
    cands = [data.legal[i] for i in rows]
    k = max(len(c) for c in cands)
    padded = np.zeros((len(rows), k, cands[0].shape[1]), np.float32)
    mask = np.zeros((len(rows), k), np.float32)
    for j, c in enumerate(cands):
        padded[j, : len(c)] = c
        mask[j, : len(c)] = 1.0
    t_mask = torch.from_numpy(mask)
    batch = {"observations": obs, "candidates": torch.from_numpy(padded), "candidate_mask": t_mask}
    return {Columns.OBS: batch}, t_mask


def smoothed_targets(actions: torch.Tensor, legal: torch.Tensor, smoothing: float) -> torch.Tensor:
    """1 - smoothing on the rules' action, smoothing spread evenly over the legal actions."""
    legal = (legal > 0).float()
    onehot = F.one_hot(actions, legal.shape[1]).float()
    return (1.0 - smoothing) * onehot + smoothing * legal / legal.sum(1, keepdim=True)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per row -sum target * log softmax(logits); illegal slots (target 0) add nothing."""
    logp = F.log_softmax(logits, dim=-1)
    return -torch.where(targets > 0, targets * logp, torch.zeros_like(logp)).sum(-1)


def distil(
    game: str,
    spec: ModelSpec,
    anchor: RulesAnchor,
    gamma: float = 1.0,
    seed: int = 0,
    data: Decisions | None = None,
    first: Decisions | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The rules' clone as the full training module's weights (policy and value heads), and a
    report: decisions, seconds, final loss, greedy agreement with the rules (on its own
    decisions and on fresh ones, each round of its budget: `grow_clone`) and entropy, and its
    value's offset at first steps (on `first`, else on fresh hands: `calibration_steps`)."""
    from croupier.games.registry import load_adapter
    from croupier.policies.learned import module_weights

    torch.set_num_threads(1)
    data = data or rules_decisions(game, anchor.clone_decisions, seed=seed, gamma=gamma)
    if not len(data):
        raise ValueError(f"the rules of {game} made no decision in {data.hands} hands")
    t0 = time.monotonic()
    adapter = load_adapter(game)
    recorded = data.seconds
    module, losses, data, rounds = grow_clone(game, adapter, spec, anchor, data, gamma, seed)
    fit_s = time.monotonic() - t0 - (data.seconds - recorded)  # (the rounds' recording apart)
    # The checks' rows follow the first budget, not the grown one: what they measure (the
    # value at first steps, the clone's level) does not need more deals as the fit does.
    checked = min(len(data), anchor.clone_decisions)
    first = calibration_steps(game, checked, seed, gamma) if first is None else first
    offset = first_step_offset(module, first)
    weights = module_weights(module)
    # The clone itself against the rules, on as many fresh first steps: its own level.
    player = sampler(from_module(adapter, spec, served_weights(game, spec, weights)), seed + 2)
    mine = rules_decisions(game, len(first), seed=seed + 2, gamma=gamma, deviate=0.0,
                           first_steps=True, player=player)  # fmt: skip
    report = {
        "decisions": len(data),
        "hands": data.hands,
        "record_s": round(data.seconds, 1),
        "fit_s": round(fit_s, 1),
        "policy_loss": losses[-1][0] if losses else None,
        "value_loss": losses[-1][1] if losses else None,
        **clone_fit(module, data),
        "rounds": rounds,
        **offset,
        **clone_level(module, mine, offset["value_scale"]),
        "settings": anchor.to_dict(),
    }
    return weights, report


def grow_clone(
    game: str,
    adapter: GameAdapter,
    spec: ModelSpec,
    anchor: RulesAnchor,
    data: Decisions,
    gamma: float,
    seed: int,
) -> tuple[Any, list[tuple[float, float]], Decisions, list[dict[str, Any]]]:
    """The clone fitted to `data`, then, while it still misses the rules on fresh decisions
    (`stop_growing`), to twice as many (new deals; the same module fitted on), up to
    `anchor.clone_max_decisions`. Returns the module, its last round's losses, the decisions
    it was fitted to, and each round's fit on the fresh ones."""
    held = rules_decisions(game, min(HELD_OUT, len(data)), seed=seed + 3, gamma=gamma,
                           deviate=0.0, ask_twice=True)  # fmt: skip
    module, rounds, missed = None, [], []
    # The budget, not the decisions recorded (whole hands: a few more), is what doubles, so
    # 20,000 reaches a most of 160,000 in three doublings.
    budget = anchor.clone_decisions
    for round_ in range(1, 64):  # bounded: the budget doubles each round
        module, losses = fit_clone(adapter, spec, anchor, data, seed, module)
        fit, misses = held_out_fit(module, held)
        rounds.append({"decisions": len(data), **fit})
        missed.append(misses)
        stop = stop_growing(rounds, missed, 2 * budget, anchor.clone_max_decisions)
        if stop is not None:
            rounds[-1]["stop"] = stop
            break
        data = data + rules_decisions(game, budget, seed=seed + 10 + round_, gamma=gamma)
        budget *= 2
    return module, losses, data, rounds


def stop_growing(
    rounds: list[dict[str, Any]], missed: list[np.ndarray], next_budget: int, most: int
) -> str | None:
    """Why the clone of the last round is not fitted to more decisions, or None: it misses
    the rules on fresh ones no more often than they miss themselves plus CLONE_MISS_TOLERANCE
    ("close to the rules"); the last doubling did not cut its misses by more than their
    noise: of the same fresh decisions, those it now gets right less those it now gets wrong,
    within twice their spread (a paired sign test: "a doubling no longer helps"); or the next
    budget is past the most ("the most decisions")."""
    last = rounds[-1]
    if last["misses"] - last["rules_misses"] <= CLONE_MISS_TOLERANCE:
        return "close to the rules"
    if len(missed) > 1:
        fixed = int((missed[-2] & ~missed[-1]).sum())
        broken = int((missed[-1] & ~missed[-2]).sum())
        if fixed - broken <= 2.0 * math.sqrt(fixed + broken):
            return "a doubling no longer helps"
    if next_budget > most:
        return "the most decisions"
    return None


@torch.no_grad()
def held_out_fit(module: Any, held: Decisions) -> tuple[dict[str, float], np.ndarray]:
    """On fresh decisions of the rules asked twice (`rules_decisions(ask_twice=True)`), of
    those with a choice: the share where the module's most likely move is not the rules'
    (`misses`), and where the rules' second answer is not their first (`rules_misses`); and
    which of them the module missed."""
    choice = np.array([int((m > 0).sum()) > 1 if m.ndim == 1 else len(m) > 1
                       for m in held.legal], bool)  # fmt: skip
    rows = np.flatnonzero(choice)
    if not len(rows):
        return {"misses": 0.0, "rules_misses": 0.0, "held_out": 0}, np.zeros(0, bool)
    predicted = []
    for start in range(0, len(rows), 1024):
        batch, _ = _batch(held, rows[start : start + 1024])
        predicted.append(module.forward_train(batch)[Columns.ACTION_DIST_INPUTS].argmax(-1))
    missed = torch.cat(predicted).numpy() != held.actions[rows]
    assert held.again is not None
    return {"misses": float(missed.mean()),
            "rules_misses": float((held.again[rows] != held.actions[rows]).mean()),
            "held_out": len(rows)}, missed  # fmt: skip


def fit_clone(
    adapter: GameAdapter,
    spec: ModelSpec,
    anchor: RulesAnchor,
    data: Decisions,
    seed: int = 0,
    module: Any = None,
) -> tuple[Any, list[tuple[float, float]]]:
    """A fresh module of `spec` for `adapter`'s spaces (or `module`, fitted on) fitted to the
    rules' decisions (cross-entropy to their moves, smoothed, and its value head to the
    returns, or to their mean without `anchor.clone_value`), in eval mode, and its (policy,
    value) losses minibatch by minibatch."""
    torch.manual_seed(seed)
    if module is None:
        module = spec.rl_module_spec(adapter.observation_space, adapter.action_space).build()
    module.train()
    params = [p for p in module.parameters() if p.requires_grad]
    optim = torch.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(seed)
    n, size = len(data), 256
    # Without `clone_value` the value head learns the mean return alone: a baseline that
    # knows nothing, as an untrained critic's, without its noise.
    returns = data.returns
    if not anchor.clone_value:
        returns = np.full_like(returns, returns.mean())
    losses = []
    for _ in range(anchor.clone_epochs):
        order = rng.permutation(n)
        for start in range(0, n, size):
            rows = order[start : start + size]
            batch, legal = _batch(data, rows)
            out = module.forward_train(batch)
            actions = torch.from_numpy(data.actions[rows])
            targets = smoothed_targets(actions, legal, anchor.smoothing)
            policy_loss = cross_entropy(out[Columns.ACTION_DIST_INPUTS], targets).mean()
            values = module.compute_values(batch, embeddings=out.get(Columns.EMBEDDINGS))
            value_loss = F.mse_loss(values, torch.from_numpy(returns[rows]))
            loss = policy_loss + 0.5 * value_loss
            optim.zero_grad()
            loss.backward()
            optim.step()
            losses.append((policy_loss.item(), value_loss.item()))
    module.eval()
    return module, losses


def calibration_steps(game: str, clone_decisions: int, seed: int, gamma: float) -> Decisions:
    """Fresh hands of the rules against the rules, each seat's first decision only (a fifth of
    the clone's decisions, other deals than its own), to check the clone's value on."""
    rows = max(clone_decisions // CALIBRATION_SHARE, 2)
    return rules_decisions(game, rows, seed=seed + 1, gamma=gamma, deviate=0.0, first_steps=True)


@torch.no_grad()
def clone_values(module: Any, steps: Decisions) -> np.ndarray:
    """float64[N]: the module's value at each of `steps`' rows."""
    batch, _ = _batch(steps, np.arange(len(steps)))
    out = module.forward_train(batch)
    values = module.compute_values(batch, embeddings=out.get(Columns.EMBEDDINGS))
    return values.numpy().astype(np.float64)


@torch.no_grad()
def first_step_offset(module: Any, first: Decisions) -> dict[str, float]:
    """How far the clone's value at a seat's first decision is from what the rules then make,
    on fresh hands of the rules against the rules (`first`: first steps only). The value is
    first scaled by how much of the returns it tracks there (`value_scale`: the regression of
    the returns on the values, within [0, MAX_VALUE_SCALE]), then the offset is the mean of
    (return - scale * value), with its standard error and the rows. The anchor's gain is read
    the same way. Why the scale: fitted on a few hundred hands, the value can add more noise
    than it removes (UNO: 0.97 a hand of residual against the payoff's own 0.85); scaled, the
    residual is never much above the payoff's spread, and the value still removes what it
    knows (a Leduc deal's card)."""
    returns, values = first.returns.astype(np.float64), clone_values(module, first)
    scale = 1.0
    if len(values) > 2 and values.var() > 1e-12:
        slope = float(np.cov(returns, values)[0, 1] / values.var(ddof=1))
        scale = min(max(slope, 0.0), MAX_VALUE_SCALE)
    diff = returns - scale * values
    se = float(diff.std(ddof=1) / len(diff) ** 0.5) if len(diff) > 1 else 0.0
    return {"value_offset": float(diff.mean()), "value_offset_se": se,
            "value_offset_rows": len(diff), "value_scale": scale,
            "value_offset_s": round(first.seconds, 1)}  # fmt: skip


@torch.no_grad()
def clone_level(module: Any, mine: Decisions, scale: float) -> dict[str, Any]:
    """The clone's own gain against the rules (`mine`: its first steps playing a team against
    the rules, `rules_decisions(player=...)`), read as the learner reads the policy's: the
    mean of (return - scale * value), before the offset. Per team; its worst team's is the
    pull back's floor (`rules_anchor.Release.floor`), with that mean's standard error."""
    gains = mine.returns.astype(np.float64) - scale * clone_values(module, mine)
    assert mine.teams is not None
    by_team = []
    for team in np.unique(mine.teams).tolist():
        g = gains[mine.teams == team]
        se = float(g.std(ddof=1) / len(g) ** 0.5) if len(g) > 1 else 0.0
        by_team.append({"team": team, "gain": float(g.mean()), "se": se, "rows": len(g)})
    worst = min(by_team, key=lambda t: t["gain"])
    return {"clone_gain": worst["gain"], "clone_gain_se": worst["se"],
            "clone_gain_by_team": by_team, "clone_play_s": round(mine.seconds, 1)}  # fmt: skip


@torch.no_grad()
def clone_fit(module: Any, data: Decisions, rows: int = 4096) -> dict[str, float]:
    """Over (up to) `rows` of `data`: how often the module's most likely action is the
    rules', and its mean entropy over the decisions with a choice."""
    idx = np.arange(min(rows, len(data)))
    batch, legal = _batch(data, idx)
    logits = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
    agree = (logits.argmax(-1).numpy() == data.actions[idx]).mean()
    p = F.softmax(logits, -1)
    logp = F.log_softmax(logits, -1)
    entropy = -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)
    choice = (legal > 0).sum(-1) > 1
    return {
        "greedy_agreement": float(agree),
        "entropy": float(entropy[choice].mean()) if bool(choice.any()) else 0.0,
    }


def served_weights(game: str, spec: ModelSpec, full: dict[str, np.ndarray]) -> dict[str, Any]:
    """Of a full module's weights, those the served (inference-only) module holds."""
    from croupier.games.registry import load_adapter
    from croupier.policies.learned import PolicyVersions

    keys = PolicyVersions(load_adapter(game), spec).weights(0).keys()
    return {k: full[k] for k in keys}

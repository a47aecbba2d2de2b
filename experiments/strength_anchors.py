"""In-process anchor for doudizhu: candidate-scoring PPO trained against the rules.

Plain torch, CleanRL style: the whole algorithm reads top to bottom. The game runs in this
process on RLCard's engine (no HTTP, no link); the learned seats see the state exactly as the
engine would send it, through `DoudizhuAdapter` (the same features the served policy gets),
or through another doudizhu adapter of scored candidates (`adapter`, e.g. the card toolkit's
`croupier.games.doudizhu_cards:DoudizhuCardsCandidates`): the same PPO on other features.

- `learn="landlord"`: the learned policy plays the landlord against two `doudizhu-rule-v1`
  peasants.
- `learn="peasants"`: both peasants are learned (each seat its own episode; partners share the
  team payoff, which RLCard's payoffs already give them) against the rule landlord, either one
  role-conditioned policy for both seats (`peasant_policies="shared"`) or one per seat
  (`"separate"`).

Reward: +1 for a won game, -1 for a lost one, at the seat's last decision; gamma 1, GAE.
Evaluation (`evaluate`): win rate of the learned side with a 95% CI over fixed deals (the same
seeds for every checkpoint, and for the rules-vs-rules baseline on those deals), greedy or
sampled.

Run: `python -m experiments.strength_anchors --learn landlord --minutes 5 --out run.json`
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from rlcard.games.doudizhu.game import DoudizhuGame

from croupier.games.base import CandidateAdapter, rules_seeded
from croupier.games.doudizhu import (
    SERVED_FEATURES,
    DoudizhuAdapter,
    FeatureSpec,
    rule_move,
)
from croupier.policies.candidates import CandidateNet
from croupier.stats import win_rate_ci


@dataclass
class PPOConfig:
    learn: str = "landlord"  # "landlord" | "peasants"
    peasant_policies: str = "shared"  # "shared" (role-conditioned) | "separate"
    # The state and candidate features (`FeatureSpec`); the served ones unless overridden.
    history: int = SERVED_FEATURES.history  # last moves in the state features (0 = none)
    move_context: int = int(SERVED_FEATURES.move_context)  # 1: moves say what they leave
    # Another doudizhu `CandidateAdapter` ("package.module:Class"; "": `DoudizhuAdapter` with
    # the features above).
    adapter: str = ""
    hiddens: list[int] = field(default_factory=lambda: [256, 256])
    score_hidden: int = 128
    lr: float = 3e-4
    ent_coef: float = 0.01
    clip: float = 0.2
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    gae_lambda: float = 0.95
    epochs: int = 4
    minibatch: int = 512
    decisions_per_update: int = 4096  # learned decisions per PPO update (whole games)
    parallel_games: int = 64  # games stepped together: one forward for all pending decisions
    minutes: float = 5.0
    max_decisions: int = 0  # stop after this many learned decisions (0 = by minutes only)
    eval_every_s: float = 60.0
    eval_games: int = 500
    final_games: int = 2000  # the last checkpoint's evaluation, greedy and sampled
    seed: int = 0


def make_adapter(cfg: PPOConfig) -> CandidateAdapter:
    if not cfg.adapter:
        return DoudizhuAdapter(FeatureSpec(cfg.history, bool(cfg.move_context)))
    from croupier.games.registry import import_object

    target = import_object(cfg.adapter)
    adapter = target() if isinstance(target, type) else target
    if not isinstance(adapter, CandidateAdapter) or adapter.name != "doudizhu":
        raise ValueError(f"{cfg.adapter} is not a doudizhu adapter of scored candidates")
    return adapter


def as_sent(state: dict[str, Any]) -> dict[str, Any]:
    """RLCard's raw state as the engine sends it: the legal moves as `legal_actions` (the
    hand-made adapter reads RLCard's `actions` too; a declared game reads what it declares)."""
    return {**state, "legal_actions": state["actions"]}


def learned_seats(learn: str, landlord: int) -> list[int]:
    if learn == "landlord":
        return [landlord]
    if learn == "peasants":
        return [s for s in range(3) if s != landlord]
    raise ValueError(f"learn must be 'landlord' or 'peasants', got {learn!r}")


class Policies:
    """The learned networks and which one plays a seat (by role relative to the landlord)."""

    def __init__(self, cfg: PPOConfig, adapter: CandidateAdapter):
        n = 2 if cfg.learn == "peasants" and cfg.peasant_policies == "separate" else 1
        self.nets = [
            CandidateNet(adapter.obs_size, adapter.candidate_size, cfg.hiddens, cfg.score_hidden)
            for _ in range(n)
        ]

    def net_of(self, seat: int, landlord: int) -> int:
        # Separate peasants: 0 plays right after the landlord, 1 right before.
        return 0 if len(self.nets) == 1 else (seat - landlord) % 3 - 1


def pad(cands: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidate lists of different lengths as [B, Kmax, F] plus a [B, Kmax] mask."""
    kmax = max(len(c) for c in cands)
    out = np.zeros((len(cands), kmax, cands[0].shape[1]), np.float32)
    mask = np.zeros((len(cands), kmax), np.float32)
    for i, c in enumerate(cands):
        out[i, : len(c)] = c
        mask[i, : len(c)] = 1.0
    return torch.from_numpy(out), torch.from_numpy(mask)


def act(
    net: CandidateNet, obs: list[np.ndarray], cands: list[np.ndarray], greedy: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One forward for all pending decisions: (chosen candidate, its log-prob, value)."""
    c, m = pad(cands)
    with torch.no_grad():
        logits, value = net(torch.from_numpy(np.stack(obs)), c, m)
        dist = torch.distributions.Categorical(logits=logits)
        a = logits.argmax(-1) if greedy else dist.sample()
        return a.numpy(), dist.log_prob(a).numpy(), value.numpy()


class Tables:
    """`n` doudizhu games; rule seats move at once, learned seats wait for `decide`."""

    def __init__(self, n: int, learn: str, adapter: CandidateAdapter, seed: int):
        self.learn, self.adapter = learn, adapter
        self.rules = rule_move
        self.games = [DoudizhuGame() for _ in range(n)]
        self.rng = np.random.default_rng(seed)
        for g in self.games:
            g.np_random = np.random.RandomState(int(self.rng.integers(2**31)))
        self.states: list[dict[str, Any] | None] = [None] * n
        self.steps = 0  # moves played by every seat (env steps)

    def deal(self, i: int, seed: int | None = None) -> None:
        g = self.games[i]
        if seed is not None:
            g.np_random = np.random.RandomState(seed)
        self.states[i], _ = g.init_game()
        self._advance(i)

    def _advance(self, i: int) -> None:
        """Play rule seats until a learned seat must act or the game is over."""
        g = self.games[i]
        learned = learned_seats(self.learn, g.round.landlord_id)
        while not g.is_over() and g.round.current_player not in learned:
            self.states[i], _ = g.step(self.rules(self.states[i]))
            self.steps += 1

    def pending(self) -> list[int]:
        return [i for i, g in enumerate(self.games) if not g.is_over()]

    def step(self, i: int, move: str) -> None:
        self.states[i], _ = self.games[i].step(move)
        self.steps += 1
        self._advance(i)

    def won(self, i: int) -> bool:
        """Did the learned side win game i?"""
        g = self.games[i]
        return (g.winner_id == g.round.landlord_id) == (self.learn == "landlord")


def collect(cfg: PPOConfig, pol: Policies, tables: Tables, adapter: CandidateAdapter) -> dict:
    """Whole games until at least `decisions_per_update` learned decisions; every seat's
    decisions in order, reward at its last one."""
    buf: dict[str, list] = {k: [] for k in ("obs", "cands", "act", "logp", "val", "net", "ep")}
    episodes: dict[tuple[int, int, int], list[int]] = {}  # (table, deal no., seat) -> rows
    results: dict[tuple[int, int, int], float] = {}
    deal_no = [0] * len(tables.games)
    for i in range(len(tables.games)):
        tables.deal(i)
    wins = games = 0
    while True:
        live = tables.pending()
        if not live:
            break
        # Group the pending decisions by network: one forward per network.
        groups: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        for i in live:
            g = tables.games[i]
            obs, cands = adapter.encode_candidates(as_sent(tables.states[i]))
            k = pol.net_of(g.round.current_player, g.round.landlord_id)
            groups.setdefault(k, []).append((i, obs, cands))
        for k, items in groups.items():
            a, logp, val = act(pol.nets[k], [x[1] for x in items], [x[2] for x in items], False)
            for (i, obs, cands), ai, lp, v in zip(items, a, logp, val, strict=True):
                g = tables.games[i]
                key = (i, deal_no[i], g.round.current_player)
                episodes.setdefault(key, []).append(len(buf["act"]))
                for name, x in (("obs", obs), ("cands", cands), ("act", int(ai)),
                                ("logp", float(lp)), ("val", float(v)), ("net", k),
                                ("ep", key)):  # fmt: skip
                    buf[name].append(x)
                tables.step(i, tables.states[i]["actions"][int(ai)])
                if g.is_over():
                    won = tables.won(i)
                    wins += won
                    games += 1
                    for s in learned_seats(cfg.learn, g.round.landlord_id):
                        results[(i, deal_no[i], s)] = 1.0 if won else -1.0
                    if len(buf["act"]) < cfg.decisions_per_update:
                        deal_no[i] += 1
                        tables.deal(i)
    # GAE per seat-episode (gamma 1): reward only at the end.
    n = len(buf["act"])
    adv, ret = np.zeros(n, np.float32), np.zeros(n, np.float32)
    val = np.asarray(buf["val"], np.float32)
    for key, rows in episodes.items():
        r = results[key]
        last_adv, next_v = 0.0, 0.0
        for j, row in enumerate(reversed(rows)):
            reward = r if j == 0 else 0.0
            delta = reward + next_v - val[row]
            last_adv = delta + cfg.gae_lambda * last_adv
            adv[row], next_v = last_adv, val[row]
        for row in rows:
            ret[row] = adv[row] + val[row]
    buf.update(adv=adv, ret=ret, wins=wins, games=games)
    return buf


def update(cfg: PPOConfig, pol: Policies, opts: list, buf: dict) -> dict[str, float]:
    """PPO's clipped update, per network, over minibatches of whole decisions."""
    stats: dict[str, float] = {}
    nets = np.asarray(buf["net"])
    for k, (net, opt) in enumerate(zip(pol.nets, opts, strict=True)):
        rows = np.flatnonzero(nets == k)
        obs = torch.from_numpy(np.stack([buf["obs"][r] for r in rows]))
        acts = torch.as_tensor([buf["act"][r] for r in rows])
        old_logp = torch.as_tensor([buf["logp"][r] for r in rows])
        adv = torch.from_numpy(buf["adv"][rows])
        ret = torch.from_numpy(buf["ret"][rows])
        for _ in range(cfg.epochs):
            perm = np.random.permutation(len(rows))
            for start in range(0, len(rows), cfg.minibatch):
                mb = perm[start : start + cfg.minibatch]
                c, m = pad([buf["cands"][rows[j]] for j in mb])
                logits, value = net(obs[mb], c, m)
                dist = torch.distributions.Categorical(logits=logits)
                logp = dist.log_prob(acts[mb])
                ratio = torch.exp(logp - old_logp[mb])
                a = adv[mb]
                # Population std: a last minibatch of one row gives 0, not NaN (the sample
                # std of one value is NaN, and NaN advantages made NaN weights).
                a = (a - a.mean()) / (a.std(correction=0) + 1e-8)
                pg = -torch.min(ratio * a, torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * a)
                # Entropy of the legal candidates only (padded ones have probability 0).
                p = dist.probs
                ent = -(p * torch.where(m > 0, dist.logits, torch.zeros_like(p))).sum(-1)
                loss = pg.mean() + cfg.vf_coef * ((value - ret[mb]) ** 2).mean()
                loss = loss - cfg.ent_coef * ent.mean()
                opt.zero_grad()
                loss.backward()
                nn_utils_clip(net, cfg.max_grad_norm)
                opt.step()
        stats[f"entropy_{k}"] = float(ent.mean().detach())
        stats[f"clipfrac_{k}"] = float(((ratio - 1).abs() > cfg.clip).float().mean())
    return stats


def nn_utils_clip(net: torch.nn.Module, max_norm: float) -> None:
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)


def evaluate(
    pol: Policies | None,
    learn: str,
    adapter: CandidateAdapter,
    games: int,
    greedy: bool = True,
    seed: int = 10_000,
    parallel: int = 64,
) -> dict[str, float]:
    """Win rate of the learned side over `games` fixed deals (seeds seed..seed+games-1);
    `pol=None` plays the rule agent in the learned seats (the baseline on the same deals)."""
    with rules_seeded(seed):  # the rule agent's draws, fixed for these deals
        return _evaluate(pol, learn, adapter, games, greedy, seed, parallel)


def _evaluate(
    pol: Policies | None,
    learn: str,
    adapter: CandidateAdapter,
    games: int,
    greedy: bool,
    seed: int,
    parallel: int,
) -> dict[str, float]:
    tables = Tables(min(parallel, games), learn, adapter, seed)
    rules = rule_move
    next_deal, wins, done = 0, 0, 0
    for i in range(len(tables.games)):
        tables.deal(i, seed + next_deal)
        next_deal += 1
    while done < games:
        live = tables.pending()
        groups: dict[int, list[int]] = {}
        for i in live:
            g = tables.games[i]
            k = 0 if pol is None else pol.net_of(g.round.current_player, g.round.landlord_id)
            groups.setdefault(k, []).append(i)
        for k, idx in groups.items():
            if pol is None:
                moves = [rules(tables.states[i]) for i in idx]
            else:
                enc = [adapter.encode_candidates(as_sent(tables.states[i])) for i in idx]
                a, _, _ = act(pol.nets[k], [e[0] for e in enc], [e[1] for e in enc], greedy)
                moves = [tables.states[i]["actions"][int(x)] for i, x in zip(idx, a, strict=True)]
            for i, move in zip(idx, moves, strict=True):
                tables.step(i, move)
                if tables.games[i].is_over():
                    wins += tables.won(i)
                    done += 1
                    if next_deal < games:
                        tables.deal(i, seed + next_deal)
                        next_deal += 1
    p, ci = win_rate_ci(wins, games)
    return {"win_rate": p, "ci95": ci, "games": games, "greedy": greedy}


def train(cfg: PPOConfig, log: Any = print, out: str = "") -> dict[str, Any]:
    """Train, evaluating every `eval_every_s` seconds of training; with `out`, the curve so
    far (JSON) and the weights (`.pt`) are written at every checkpoint, so a run cut short
    keeps what it measured."""
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    adapter = make_adapter(cfg)
    pol = Policies(cfg, adapter)
    opts = [torch.optim.Adam(n.parameters(), lr=cfg.lr, eps=1e-5) for n in pol.nets]
    tables = Tables(cfg.parallel_games, cfg.learn, adapter, cfg.seed)
    t0 = time.monotonic()
    decisions = 0
    eval_s = 0.0  # time spent evaluating, not counted as training
    curve: list[dict[str, Any]] = []
    next_eval = 0.0

    def checkpoint() -> None:
        nonlocal eval_s
        te = time.monotonic()
        ev = evaluate(pol, cfg.learn, adapter, cfg.eval_games)
        point = {"train_s": round(te - t0 - eval_s, 1), "decisions": decisions,
                 "env_steps": tables.steps, **ev}  # fmt: skip
        eval_s += time.monotonic() - te
        curve.append(point)
        log(json.dumps(point))
        if out:
            save(out, {"config": asdict(cfg), "curve": curve}, pol)

    while True:
        train_s = time.monotonic() - t0 - eval_s
        if train_s >= next_eval:
            checkpoint()
            next_eval += cfg.eval_every_s
        if train_s >= cfg.minutes * 60 or (cfg.max_decisions and decisions >= cfg.max_decisions):
            break
        buf = collect(cfg, pol, tables, adapter)
        decisions += len(buf["act"])
        stats = update(cfg, pol, opts, buf)
        log(json.dumps({"decisions": decisions, "train_win": buf["wins"] / max(buf["games"], 1),
                        **{k: round(v, 3) for k, v in stats.items()}}))  # fmt: skip
    train_s = time.monotonic() - t0 - eval_s
    final = {
        "greedy": evaluate(pol, cfg.learn, adapter, cfg.final_games, greedy=True, seed=50_000),
        "sampled": evaluate(pol, cfg.learn, adapter, cfg.final_games, greedy=False, seed=50_000),
    }
    return {"config": asdict(cfg), "train_s": round(train_s, 1), "decisions": decisions,
            "decisions_per_s": round(decisions / max(train_s, 1e-9), 1), "env_steps": tables.steps,
            "env_steps_per_s": round(tables.steps / max(train_s, 1e-9), 1), "curve": curve,
            "final": final, "policies": pol}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f, v in asdict(PPOConfig()).items():
        if isinstance(v, list):
            p.add_argument(f"--{f.replace('_', '-')}", type=int, nargs="+", default=v)
        else:
            p.add_argument(f"--{f.replace('_', '-')}", type=type(v), default=v)
    p.add_argument("--out", default="")
    args = vars(p.parse_args())
    out = args.pop("out")
    res = train(PPOConfig(**args), out=out)
    pol = res.pop("policies")
    print(json.dumps({k: v for k, v in res.items() if k != "curve"}))
    if out:
        save(out, res, pol)


def save(out: str, result: dict[str, Any], pol: Policies) -> None:
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    torch.save([n.state_dict() for n in pol.nets], out.rsplit(".", 1)[0] + ".pt")


if __name__ == "__main__":
    main()

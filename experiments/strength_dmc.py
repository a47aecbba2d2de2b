"""RLCard's DMC trainer (DouZero's method, `rlcard.agents.dmc_agent`) as a doudizhu anchor.

What a user would otherwise pick for doudizhu: deep Monte-Carlo Q-learning of all three seats
by self-play (a harder setting than croupier's, which learns one side against the rules: the
report says so beside each number). It runs in a process of its own (RLCard's trainer starts
actor processes and never returns before its frame budget), for the same minutes as the runs
it is compared with; its per-seat weights are saved every `SAVE_EVERY_S` and the newest
complete set is evaluated: its landlord (RLCard's player 0) against two `doudizhu-rule-v1`
peasants, its peasants against the rule landlord, over fixed deals, greedy (a Q-learner's own
policy), with a 95% CI.

RLCard's trainer needs `gitpython` (its log writer records the repository's commit):
`pip install 'croupier[bench]'`. The weights files are RLCard's (`torch.save` of its agent
objects), written by this machine's own child process and read back here: local files, never
anything from the network.

Run alone: `python -m experiments.strength_dmc --minutes 12 --games 2000 --out dmc.json`
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from croupier.stats import win_rate_ci

SAVE_EVERY_S = 30.0  # the weights evaluated are at most this old when the time is up
ACTORS = 2  # the issue's own DMC measurement on 2 cores (~140 frames/s)
SETTING = "RLCard DMC, self-play of all three seats (rlcard.agents.dmc_agent)"
_WEIGHTS = re.compile(r"^(\d)_(\d+)\.pth$")  # RLCard's name: <player>_<frames>.pth


def _train_forever(savedir: str, actors: int) -> None:
    """The child process: RLCard's trainer until it is killed."""
    import rlcard
    import torch
    from rlcard.agents.dmc_agent import DMCTrainer

    torch.set_num_threads(1)
    trainer = DMCTrainer(
        rlcard.make("doudizhu"),
        cuda="",  # CPU: actors and learner
        xpid="dmc",
        savedir=savedir,
        save_interval=SAVE_EVERY_S / 60,  # minutes
        num_actors=actors,
        num_threads=1,  # learner threads per seat: three seats on two cores already
        training_device="cpu",
    )
    trainer.start()


def _complete_sets(run_dir: Path) -> dict[int, list[Path]]:
    """Saved frames -> the three seats' weights files, for the frames all three were saved."""
    by_frames: dict[int, dict[int, Path]] = {}
    for f in run_dir.glob("*.pth"):
        m = _WEIGHTS.match(f.name)
        if m:
            by_frames.setdefault(int(m.group(2)), {})[int(m.group(1))] = f
    return {k: [v[p] for p in range(3)] for k, v in by_frames.items() if len(v) == 3}


def _prune(run_dir: Path) -> None:
    """Keep the newest complete set only (each is ~3 x 4 MB; a long run saves hundreds)."""
    sets = _complete_sets(run_dir)
    for frames in sorted(sets)[:-1]:
        for f in sets[frames]:
            f.unlink(missing_ok=True)


def train(minutes: float, savedir: Path, actors: int = ACTORS) -> dict[str, Any]:
    """Train for `minutes` of wall-clock (start-up included), then stop the trainer's whole
    process group. Returns the newest complete weights set and its frame count."""
    cmd = [sys.executable, "-m", "experiments.strength_dmc", "--child", str(savedir),
           "--actors", str(actors)]  # fmt: skip
    log = (savedir / "trainer.log").open("wb")
    # The child imports this module by name: the repository root on its path, wherever it runs.
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=env)  # fmt: skip
    start = time.monotonic()
    deadline = start + minutes * 60
    try:
        while time.monotonic() < deadline:  # bounded by the deadline
            if proc.poll() is not None:
                raise RuntimeError(
                    f"RLCard's DMC trainer exited ({proc.returncode}); see {log.name}"
                )
            _prune(savedir / "dmc")
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    finally:
        with contextlib.suppress(ProcessLookupError):  # the trainer and the actors it started
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
    _prune(savedir / "dmc")
    sets = _complete_sets(savedir / "dmc")
    if not sets:
        raise RuntimeError(f"RLCard's DMC trainer saved no weights in {minutes:g} min")
    frames = max(sets)
    return {"frames": frames, "weights": [str(p) for p in sets[frames]],
            "train_s": time.monotonic() - start}  # fmt: skip


def evaluate(weights: list[str], side: str, games: int, seed: int = 10_000) -> dict[str, Any]:
    """Win rate of DMC's `side` ("landlord" | "peasants") against the rules on the other side,
    over `games` deals seeded `seed`; greedy (DMC's `eval_step`)."""
    import rlcard
    import torch

    from croupier.games.base import rules_seeded
    from croupier.games.doudizhu import rule_agent

    torch.set_num_threads(1)
    # RLCard's agent objects, saved by our own child process (see the module's note).
    dmc = [torch.load(w, map_location="cpu", weights_only=False) for w in weights]
    rule = rule_agent()
    agents = [dmc[0], rule, rule] if side == "landlord" else [rule, dmc[1], dmc[2]]
    env = rlcard.make("doudizhu", config={"seed": seed})
    env.set_agents(agents)
    wins = 0
    with rules_seeded(seed):
        for _ in range(games):
            _, payoffs = env.run(is_training=False)
            # RLCard's payoffs: 1 to the winning side, 0 to the other; player 0 is the landlord.
            wins += int(payoffs[0] == 1) if side == "landlord" else int(payoffs[1] == 1)
    p, ci = win_rate_ci(wins, games)
    return {"win_rate": p, "ci95": ci, "games": games, "greedy": True}


def run_dmc(minutes: float, games: int, actors: int = ACTORS) -> dict[str, Any]:
    """Train `minutes`, then evaluate both sides (one self-play run gives both)."""
    if shutil.which("git") is None:
        raise RuntimeError("RLCard's DMC trainer needs git (its log writer runs it)")
    with tempfile.TemporaryDirectory(prefix="croupier-dmc-") as tmp:
        trained = train(minutes, Path(tmp), actors)
        final = {
            side: evaluate(trained["weights"], side, games) for side in ("landlord", "peasants")
        }
    return {
        "setting": SETTING,
        "minutes": minutes,
        "actors": actors,
        "frames": trained["frames"],
        "train_s": trained["train_s"],
        "final": final,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--games", type=int, default=2000)
    ap.add_argument("--actors", type=int, default=ACTORS)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)  # the trainer process
    args = ap.parse_args()
    if args.child:
        _train_forever(args.child, args.actors)
        return
    result = run_dmc(args.minutes, args.games, args.actors)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()

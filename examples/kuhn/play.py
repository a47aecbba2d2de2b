"""The studio's engine loop for Kuhn poker, talking to croupier over plain HTTP/JSON (stdlib
only: what any language's engine does with its own HTTP client).

    python -m examples.kuhn.play --url http://127.0.0.1:8000 --hands 2000 --seats learned,rules
"""

from __future__ import annotations

import argparse
import json
import random
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from examples.kuhn.game import KuhnHand


def call(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310 - your server
        return json.loads(resp.read())


def play_hand(url: str, seats: list[str], rng: random.Random) -> list[float]:
    """One hand, `seats[i]` in seat i: open a game, ask croupier for every decision; the
    payoff of each seat, in seat order."""
    game = call(url, "/v1/games", {"game": "kuhn-poker", "seats": {"0": seats[0], "1": seats[1]}})
    hand = KuhnHand(rng)
    while not hand.is_over():
        player = hand.current_player()
        decision = call(
            url, f"/v1/games/{game['game_id']}/decide",
            {"seat": str(player), "state": hand.state(player)},
        )  # fmt: skip
        hand.step(decision["action"])
    payoffs = hand.payoffs()
    call(url, f"/v1/games/{game['game_id']}/end", {"payoffs": {"0": payoffs[0], "1": payoffs[1]}})
    return [float(payoffs[0]), float(payoffs[1])]


def play(url: str, hands: int, seats: list[str], tables: int = 4, seed: int = 0) -> dict:
    """Play `hands` hands on `tables` threads, the two players swapping seats every hand; mean
    payoff by player, keyed `<i>:<policy>` (the i-th of `seats`): two players with the same
    policy (`learned,learned`) are two entries, not one."""

    def table(index: int) -> list[list[float]]:
        """Each hand's payoffs by player (not by seat: the players swap seats each hand)."""
        rng = random.Random(seed + index)
        out = []
        for h in range(index, hands, tables):
            swapped = h % 2 == 1
            payoffs = play_hand(url, seats[::-1] if swapped else seats, rng)
            out.append(payoffs[::-1] if swapped else payoffs)
        return out

    totals: dict[str, list[float]] = defaultdict(list)
    players = [f"{i}:{policy}" for i, policy in enumerate(seats)]
    with ThreadPoolExecutor(tables) as pool:
        for results in pool.map(table, range(tables)):
            for payoffs in results:
                for player, payoff in zip(players, payoffs, strict=True):
                    totals[player].append(payoff)
    return {p: {"hands": len(v), "mean": sum(v) / len(v)} for p, v in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--hands", type=int, default=1000)
    parser.add_argument("--seats", default="learned,rules")
    parser.add_argument("--tables", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps(play(args.url, args.hands, args.seats.split(","), args.tables), indent=2))


if __name__ == "__main__":
    main()

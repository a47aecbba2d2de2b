"""Worlds consistent with a seat's view (`Simulator.resample`, `CardGame.deal_unseen`): for
every built-in and example game, over states of mixed play, a resampled table shows the seat
exactly what it was sent, with the same legal moves, holds every card of the deck once, and
plays on to a scored end; the deal is random (chi-square) and the seed reproduces it; the
models that play on where a library's state cannot be set agree with the library move by
move (UNO and doudizhu against RLCard, crazy eights against OpenSpiel)."""

from __future__ import annotations

import importlib
import importlib.util
import random
from collections import Counter
from typing import Any

import pytest

from croupier.games.base import InvalidState
from croupier.games.cards import CardGame, Deck, Hand, Kind, Seat, SeatNumbers, Unseen
from croupier.games.registry import load_adapter, load_simulator
from croupier.games.simulator import Simulator, mixed_play_states

SPIEL = importlib.util.find_spec("pyspiel") is not None
needs_spiel = pytest.mark.skipif(not SPIEL, reason="OpenSpiel's: pip install 'croupier[games]'")


def _plays(moves: list[list[Any]]) -> list[str]:
    """The cards a shedding game's listed moves played ("play 7H 7S")."""
    return [c for m in moves if m[1].startswith("play ") for c in m[1].split(" ")[1:]]


# Per game: (its --game, hands of mixed play, the cards its state shows off every hand: with
# the hands and the world's rest they make the deck exactly once; None: not a card game
# declared through the toolkit).
GAMES: dict[str, tuple[str, int, Any]] = {
    "kuhn": ("examples.kuhn.adapter:KuhnAdapter", 12, None),
    "leduc": ("leduc-holdem", 12, None),
    "limit-holdem": (
        "examples.limit_holdem.adapter:LimitHoldem",
        16,
        lambda s: list(s["public_cards"]),
    ),
    "uno": (
        "uno",
        3,
        lambda s: [c[2:] if c[2:] in ("wild", "wild_draw_4") else c for c in s["played_cards"]],
    ),  # fmt: skip
    "doudizhu": ("doudizhu", 2, lambda s: list("".join(s["played_cards"]))),
    "president": (
        "examples.president.adapter:President",
        2,
        lambda s: sorted(set(_plays(s["moves"])) | set(s["to_beat"])),
    ),
    "hearts": ("examples.hearts.adapter:Hearts", 2, lambda s: [c for p in s["played"] for c in p]),
    "hearts-openspiel": (
        "examples.hearts_openspiel.adapter:Hearts",
        2,
        lambda s: s["trick"] + s["played"],
    ),
    "crazy-eights": (
        "examples.crazy_eights.adapter:CrazyEights",
        3,
        lambda s: [*s["played"], s["top"]],
    ),
}
OPENSPIEL = {"hearts-openspiel", "crazy-eights"}


def _params() -> list[Any]:
    return [pytest.param(name, marks=needs_spiel) if name in OPENSPIEL else name for name in GAMES]


_states: dict[str, list[dict[str, Any]]] = {}


def states_of(name: str) -> list[dict[str, Any]]:
    """What the game's table sends over a few hands of mixed play (the rules' moves and
    random ones), kept for the module."""
    if name not in _states:
        game, hands, _ = GAMES[name]
        # Leduc's, hold'em's and UNO's rules load RLCard's models (~8 s of imports): random
        # play there.
        share = 0.0 if name in ("leduc", "limit-holdem", "uno") else 0.5
        rules = load_adapter(game).rules() if share else None
        _states[name] = mixed_play_states(load_simulator(game), rules, hands, rules_share=share)
    return _states[name]


def _seen_as_sent(name: str, got: dict[str, Any], state: dict[str, Any]) -> None:
    """The resampled table's state for the seat is the one it was sent. Doudizhu's lead
    lists RLCard's set of moves in the set's order, which no process keeps: compared as a
    set (an answer's order is RLCard's own and compared as is)."""
    if name == "doudizhu" and "pass" not in state["legal_actions"]:
        got = {**got, "legal_actions": sorted(got["legal_actions"])}
        state = {**state, "legal_actions": sorted(state["legal_actions"])}
    assert got == state


@pytest.mark.parametrize("name", _params())
def test_a_resampled_table_is_the_seat_s_view_and_plays_on_to_a_scored_end(name: str) -> None:
    game = GAMES[name][0]
    table, rng = load_simulator(game), random.Random(3)
    assert type(table).resamples()
    states = states_of(name)
    assert len(states) > 20
    for i, state in enumerate(states):
        table.resample(state, rng)
        seat = table.current_player()
        _seen_as_sent(name, table.state(seat), state)
        if i % 4:  # every fourth world played out: each costs a hand
            continue
        for _ in range(2_000):
            if table.is_over():
                break
            table.step(rng.choice(table.state(table.current_player())["legal_actions"]))
        assert table.is_over()
        payoffs = table.payoffs()
        assert len(payoffs) == table.num_players and all(isinstance(p, float) for p in payoffs)
        if table.zero_sum:
            assert abs(sum(payoffs)) < 1e-9


DECLARED = [name for name, (_, _, table_cards) in GAMES.items() if table_cards is not None]


@pytest.mark.parametrize("name", [p for p in _params() if getattr(p, "values", [p])[0] in DECLARED])
def test_a_dealt_world_holds_every_card_once_and_the_hands_the_state_counts(name: str) -> None:
    game, _, table_cards = GAMES[name]
    declared = _declared(name)
    rng = random.Random(4)
    copies = dict(zip(declared.deck.cards, declared.deck.card_copies, strict=True))
    alias = dict(declared.deck.aliases)
    for state in states_of(name)[::3]:
        world = declared.deal_unseen(state, rng)
        seat = world.seat
        hand = state[declared.hand_field]
        assert world.hands[seat] == list(hand)
        counts = state.get("num_cards", state.get("num_cards_left"))
        for s, h in enumerate(world.hands):
            if counts is not None:
                assert len(h) == counts[s]
            elif name in ("hearts", "hearts-openspiel"):
                played = state["played"] if name == "hearts" else None
                gone = len(played[s]) if played else sum(m[0] == s for m in state["moves"])
                assert len(h) == 13 - gone
            else:  # hold'em: two each
                assert len(h) == 2
        dealt = [alias.get(c, c) for h in world.hands for c in h] + world.rest
        assert Counter(dealt + table_cards(state)) == Counter(copies), name


def _declared(name: str) -> CardGame:
    """The game's toolkit declaration (the built-in games' twins: `games/*_cards.py`)."""
    if name in ("uno", "doudizhu"):
        return importlib.import_module(f"croupier.games.{name}_cards").GAME
    return load_adapter(GAMES[name][0]).game


def _chi_square(observed: list[int], expected: list[float]) -> float:
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))


# The chi-square's 0.999 quantile for 2 and 1 degrees of freedom: a fair deal fails once in a
# thousand runs (the seeds are fixed: it never flakes); a dealer that favours a seat by a few
# points in a hundred fails it.
CHI2_999 = {1: 10.83, 2: 13.82}


def test_an_unseen_card_lands_in_each_hand_as_often_as_its_size_says() -> None:
    from examples.hearts.adapter import GAME
    from examples.hearts.game import HeartsSimulator

    table = HeartsSimulator()
    table.reset(5)
    for move in ("play 2C",):
        table.step(move)
    state = table.state(table.current_player())
    seat, rng, n = state["seat"], random.Random(6), 3_000
    others = [s for s in range(4) if s != seat]
    unseen = sorted(set(GAME.deck.cards) - set(state["hand"]) - {"2C"})
    landed = {card: Counter() for card in unseen[:6]}
    for _ in range(n):
        world = GAME.deal_unseen(state, rng)
        for card in landed:
            landed[card][next(s for s in others if card in world.hands[s])] += 1
    sizes = [13 - len(state["played"][s]) for s in others]  # 12, 13, 13 or so
    expected = [n * k / sum(sizes) for k in sizes]
    for card, where in landed.items():
        stat = _chi_square([where[s] for s in others], expected)
        assert stat < CHI2_999[2], (card, where, expected)


def test_an_unseen_card_is_in_the_opponent_s_hand_or_the_draw_pile_as_counts_say() -> None:
    from croupier.games.uno_cards import GAME

    state = next(s for s in states_of("uno") if s["num_cards"][1 - s["current_player"]] >= 3)
    rng, n = random.Random(7), 3_000
    world = GAME.deal_unseen(state, rng)
    other = 1 - state["current_player"]
    card = next(c for c in world.rest if c[2:].isdigit())
    held = sum(card in GAME.deal_unseen(state, rng).hands[other] for _ in range(n))
    pool = Counter(world.rest) + Counter(world.hands[other])
    k, total = state["num_cards"][other], sum(pool.values())
    p = 1 - _no_copy(pool[card], k, total)  # P(at least one of its copies in the hand)
    assert _chi_square([held, n - held], [n * p, n * (1 - p)]) < CHI2_999[1], (held, n * p)


def test_doudizhu_s_unseen_cards_split_between_the_other_two_by_their_counts() -> None:
    from croupier.games.doudizhu_cards import GAME

    state = next(s for s in states_of("doudizhu") if len(set(s["num_cards_left"])) == 3)
    seat, rng, n = state["self"], random.Random(9), 3_000
    a, b = (seat + 1) % 3, (seat + 2) % 3
    card = next(c for c in state["others_hand"] if state["others_hand"].count(c) == 1)
    to_a = sum(card in GAME.deal_unseen(state, rng).hands[a] for _ in range(n))
    share = state["num_cards_left"][a] / (state["num_cards_left"][a] + state["num_cards_left"][b])
    expected = [n * share, n * (1 - share)]
    assert _chi_square([to_a, n - to_a], expected) < CHI2_999[1], (to_a, expected)


def _no_copy(copies: int, drawn: int, total: int) -> float:
    """P(none of `copies` among `drawn` cards drawn from `total`)."""
    out = 1.0
    for i in range(drawn):
        out *= (total - copies - i) / (total - i)
    return out


def test_a_biased_dealer_fails_the_chi_square() -> None:
    """The bound can fail: a deal that gives a card to the first opponent 40% of the time
    (a fair one: 1 in 3) is caught."""
    rng, n = random.Random(8), 3_000
    biased = Counter(0 if rng.random() < 0.4 else 1 + (rng.random() < 0.5) for _ in range(n))
    assert _chi_square([biased[s] for s in range(3)], [n / 3] * 3) > CHI2_999[2]


@pytest.mark.parametrize("name", _params())
def test_the_seed_reproduces_a_world_and_its_play(name: str) -> None:
    game = GAMES[name][0]
    state = states_of(name)[len(states_of(name)) // 3]

    def played(seed: int) -> tuple[Any, ...]:
        table, rng = load_simulator(game), random.Random(seed)
        table.resample(state, rng)
        trace = []
        for _ in range(2_000):
            if table.is_over():
                break
            s = table.state(table.current_player())
            trace.append((table.current_player(), sorted(map(str, s["legal_actions"]))))
            table.step(rng.choice(sorted(map(str, s["legal_actions"]))))
        return tuple(map(str, trace)), tuple(table.payoffs())

    assert played(11) == played(11)
    if name not in ("kuhn", "leduc"):  # (few worlds: two seeds may deal the same)
        assert len({played(seed) for seed in range(12, 16)}) > 1


# --- the declaration -----------------------------------------------------------------------


def _game(**unseen: Any) -> CardGame:
    return CardGame(
        name="t",
        deck=Deck(ranks="A23", suits="SH"),
        zones=(Seat("seat"), Hand("hand", max_cards=6), SeatNumbers("n", high=6)),
        kinds=(Kind("play", (1, 1)),),
        unseen=Unseen(**unseen) if unseen else None,
    )


def test_an_unseen_declaration_names_zones_of_the_right_kind() -> None:
    assert _game(hands="n").unseen == Unseen(hands="n")
    bad_ones: list[dict[str, Any]] = [
        {"hands": "hand"},  # not a SeatNumbers zone
        {"hands": "nope"},
        {"hands": 3, "played": "n"},  # not a SeatPiles or History zone
        {"hands": "n", "pool": "n"},
        {"hands": -1},
        {"hands": "n", "gone": ("hand",)},
    ]
    for bad in bad_ones:
        with pytest.raises(ValueError, match="unseen"):
            _game(**bad)


def test_a_game_that_says_nothing_of_its_hidden_cards_cannot_deal_a_world() -> None:
    state = {"seat": 0, "hand": ["AS"], "n": [1, 1], "legal_actions": ["play AS"]}
    with pytest.raises(ValueError, match="unseen"):
        _game().deal_unseen(state, random.Random(0))
    world = _game(hands="n").deal_unseen(state, random.Random(0))
    assert world.hands[0] == ["AS"] and len(world.hands[1]) == 1 and len(world.rest) == 4
    with pytest.raises(InvalidState, match="unseen"):  # more cards held than left unseen
        _game(hands="n").deal_unseen({**state, "n": [1, 6]}, random.Random(0))


def test_simulators_without_resample_say_so() -> None:
    class Plain(Simulator):
        def reset(self, seed: int | None = None) -> None: ...
        def current_player(self) -> int:
            return 0  # noqa: E704

        def state(self, seat: int) -> dict[str, Any]:
            return {}  # noqa: E704

        def step(self, action: Any) -> None: ...
        def is_over(self) -> bool:
            return True  # noqa: E704

        def payoffs(self) -> list[float]:
            return [0.0, 0.0]  # noqa: E704

    assert not Plain.resamples()
    with pytest.raises(NotImplementedError):
        Plain().resample({}, random.Random(0))


@needs_spiel
def test_crazy_eights_worlds_have_the_true_stock_and_plays() -> None:
    """Its state sends the discard pile: a world's stock is as long as the true one, its
    cards those nobody has seen, and it counts the cards played so far (the 100th ends the
    hand), however far the moves listed are from the deal."""
    from examples.crazy_eights.game import CrazyEightsSimulator
    from examples.crazy_eights.position import MOVES_SENT, NUMBER  # NUMBER: every card

    table, world, rng = CrazyEightsSimulator(), CrazyEightsSimulator(), random.Random(5)
    checked = late = 0
    for hand in range(40):
        table.reset(hand)
        for _ in range(200):  # bounded: a hand ends by the 100th card played
            if table.is_over():
                break
            seat = table.current_player()
            state = table.state(seat)
            world.resample(state, rng)
            plays = [m for m in table.moves if m[1].startswith("play ")]
            position = world._position
            assert position is not None
            seen = {*table.hands[seat], *table.pile, table.top}
            unseen = [c for c in NUMBER if c not in seen]
            stock = len(unseen) - len(table.hands[1 - seat])
            assert (len(position.stock), position.plays) == (stock, len(plays))
            assert not set(position.stock) & seen
            assert position.state(seat)["played"] == state["played"]
            checked += 1
            late += len(table.moves) > MOVES_SENT  # the moves listed no longer reach the deal
            table.step(rng.choice(state["legal_actions"]))
    assert checked > 1_000 and late > 300


@needs_spiel
def test_crazy_eights_worlds_hold_what_the_bots_moves_showed() -> None:
    """The bot draws or passes only when no card goes, plays an 8 only when nothing else goes,
    names the suit it holds most and plays the highest card of the suit it holds most: a
    world's opponent hand agrees with each such move since which it drew nothing, and the
    true hand agrees with every check (the inference never rules out the world that is)."""
    from examples.crazy_eights.adapter import eights_rules
    from examples.crazy_eights.game import CrazyEightsSimulator, _hand_drawn_as_seen, shown

    table, world, rng = CrazyEightsSimulator(), CrazyEightsSimulator(), random.Random(3)
    checked = {"draw or pass": 0, "an 8": 0, "a suit named": 0, "a card chosen": 0}
    for hand in range(40):
        table.reset(hand)
        while not table.is_over():
            seat = table.current_player()
            state = table.state(seat)
            other = 1 - seat
            moves, named, chose = shown(state["moves"], other)
            if moves or named or chose:
                truth = table.hands[other]
                for x in moves:
                    assert sum(map(x.fits, truth)) >= len(truth) - x.late, (truth, x)
                    checked["an 8" if x.plain else "draw or pass"] += not x.late
                for x in named:
                    assert x.late or x.fits(truth), (truth, x)
                    checked["a suit named"] += not x.late
                for x in chose:
                    assert x.late or x.fits(truth), (truth, x)
                    checked["a card chosen"] += not x.late
                world.resample(state, rng)
                dealt = world._position.hands[other]
                assert len(dealt) == len(truth)
                for x in (x for x in moves if not x.late):  # what went then: none of it dealt
                    went = [c for c in dealt if c[0] == x.suit or c[1] in (x.rank, "8")]
                    assert went == ([c for c in went if c[1] == "8"] if x.plain else []), (x, dealt)
            table.step(eights_rules(state))
    assert min(checked.values()) > 20, checked
    # An opponent that is not the bot (it drew holding what goes): dealt as dealt.
    from examples.crazy_eights.game import Chose, Seen, Shown

    assert (
        _hand_drawn_as_seen(["C8", "D8"], 1, Seen([Shown("8", "C", False, 0)], [], []), rng) is None
    )
    # The bot plays, of the cards that go, the one of the suit it holds most, the highest: on
    # the king of clubs it played the king of hearts, so it held no more clubs than hearts
    # (and no higher club as many), nor a king of a suit it held more of.
    king = Chose("HK", "K", "C", [], 0)
    assert king.fits(["H3", "ST"]) and king.fits(["CQ", "S8"]) and king.fits(["H2", "H3", "CA"])
    assert not king.fits(["CQ", "C3"]) and not king.fits(["SK", "ST", "S2"])
    assert not king.fits(["CA"]) and not king.fits(["H2", "C3", "CA"])

"""UNO declared through the card-game toolkit (`games/uno_cards.py`), held to the hand-made
`games/uno.py`: it reads the engine's own JSON (every state RLCard's game produces, rules and
random play), each of RLCard's 61 actions reads into a kind, a card set and a choice and back,
features finite and of the declared sizes, the checks refuse what the hand-made adapter
refuses, the state's schema held to the checks both ways, a short round served, `bench
strength --adapter` on UNO's table, and the rules' clone through the declaration."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema_rs
import numpy as np
import pytest
from rlcard.games.uno.utils import ACTION_LIST

from croupier.games.base import InvalidState
from croupier.games.candidates import is_candidate_game
from croupier.games.presets import preset_for
from croupier.games.registry import load_adapter, load_simulator
from croupier.games.simulator import mixed_play_states
from croupier.games.uno_cards import COLORS, GAME, read_move
from tests.helpers.hands import play_hand

ROOT = Path(__file__).resolve().parent.parent
FIXED = "croupier.games.uno_cards:UnoCards"
CANDIDATES = "croupier.games.uno_cards:UnoCardsCandidates"
# The state's layout: seat, hand, target, colour in force, played cards, counts, history.
SET = GAME.set_size  # 54 cards, 15 ranks (13 + the two wilds), 4 colours, the size
HAND, COLOR = 0, 2 * SET


def engine_states(hands: int, seed: int = 7) -> list[dict[str, Any]]:
    """States as `croupier engine --game uno` sends them: half the moves the rules',
    half random, so both the rules' games and odd ones are in."""
    return mixed_play_states(load_simulator("uno"), load_adapter("uno").rules(), hands, seed)


@pytest.fixture(scope="module")
def states() -> list[dict[str, Any]]:
    states = engine_states(30)
    assert len(states) > 800
    return states


def test_every_action_of_the_game_reads_into_its_kind_cards_and_choice_and_back() -> None:
    """RLCard's 61 actions: a wild's colour is the move's choice and its card the colourless
    wild (any wild in the hand plays it); a coloured card is itself, of its trait's kind; 61
    distinct head slots, the fixed head's size, so a slot is an action."""
    slots = set()
    for action in ACTION_LIST:
        m = GAME.move(action, "legal_actions")
        kind = GAME.kinds[m.kind].name
        if action == "draw":
            assert (kind, m.counts.sum(), m.choice) == ("draw", 0, -1)
        else:
            color, trait = action.split("-", 1)
            assert kind == ("number" if trait.isdigit() else trait), action
            card = trait if trait.startswith("wild") else action
            assert m.counts.sum() == 1 and GAME.deck.cards[m.first] == card, action
            assert (GAME.choices[m.choice] if m.choice >= 0 else None) == (
                color if trait.startswith("wild") else None
            )
        slots.add(GAME.slot(m))
    assert slots == set(range(61)) and GAME.num_actions == 61
    assert sum(GAME.deck.card_copies) == 108  # RLCard's deck
    for bad in ("x-5", "r-wild_draw_2", "r-", "wild", "r-5 ", "draw r-5"):
        with pytest.raises(InvalidState, match="not a move of uno|unknown card|takes 1..1"):
            GAME.move(bad, "legal_actions")
    assert read_move("g-wild") == "wild:g wild" and read_move("b-skip") == "skip b-skip"


def test_every_engine_state_is_read_by_both_heads_and_the_schemas_agree(
    states: list[dict[str, Any]],
) -> None:
    fixed, cands = load_adapter(FIXED), load_adapter(CANDIDATES)
    hand_made = load_adapter("uno")
    hand_made_fixed = load_adapter("croupier.games.uno:UnoAdapter")  # RLCard's 61 ids
    assert (fixed.name, cands.name, fixed.num_players) == ("uno", "uno", 2)
    assert is_candidate_game(cands) and fixed.payoff_range == hand_made.payoff_range
    assert fixed.num_actions == len(ACTION_LIST)
    validator = jsonschema_rs.Draft202012Validator(fixed.state_schema())
    hand_made_schema = jsonschema_rs.Draft202012Validator(hand_made.state_schema())
    repeated = wild = 0
    for state in states:
        assert validator.is_valid(state), [e.message for e in validator.iter_errors(state)]
        assert hand_made_schema.is_valid(state)
        legal = state["legal_actions"]
        obs, mask = fixed.encode(state)
        assert obs.shape == (fixed.obs_size,) and mask.shape == (fixed.num_actions,)
        assert np.isfinite(obs).all() and obs.min() >= 0 and obs.max() <= 1
        slots = [fixed.action_index(m, state) for m in legal]
        assert all(mask[s] == 1 for s in slots) and mask.sum() == len(set(slots))
        # the hand-made head's slots are RLCard's ids; ours another order of the same 61
        assert mask.sum() == hand_made_fixed.encode(state)[1].sum()
        assert [fixed.action_value(s, state) for s in slots] == legal
        obs2, rows = cands.encode(state)
        np.testing.assert_array_equal(obs, obs2)
        assert rows.shape == (len(legal), cands.candidate_size) and np.isfinite(rows).all()
        assert [cands.inner.candidate_value(k, state) for k in range(len(legal))] == legal
        repeated += len(set(legal)) < len(legal)
        wild += any("wild" in c for c in state["hand"])
    assert repeated > 10 and wild > 100  # RLCard's repeated listings and wilds are in


def test_the_features_say_what_the_state_holds(states: list[dict[str, Any]]) -> None:
    """The hand's counts per card (a wild under any colour RLCard wrote is the one wild, four
    in the deck), the colour in force (not the wild target's printed one), and a wild's
    named colour in its candidate row."""
    a = load_adapter(CANDIDATES).inner
    state = next(s for s in states if "wild" in s["target"] and s["color"] != s["target"][0]
                 and any("wild" in c for c in s["hand"]))  # fmt: skip
    obs, _ = a.encode_candidates(state)
    held = Counter(c.split("-", 1)[1] if "wild" in c else c for c in state["hand"])
    for i, card in enumerate(GAME.deck.cards):
        assert obs[HAND + i] == pytest.approx(held[card] / GAME.copies[i]), card
    assert obs[HAND + SET - 1] == pytest.approx(len(state["hand"]) / 108)
    assert obs[COLOR : COLOR + 4].tolist() == [float(c == state["color"]) for c in COLORS]
    state = next(s for s in states if any("wild" in m for m in s["legal_actions"]))
    rows = a.encode_candidates(state)[1]
    choice, suits = rows[:, -10:-6], rows[:, -6:-2]  # | choice | its colours | what it keeps
    for move, named_row, suit_row in zip(state["legal_actions"], choice, suits, strict=True):
        named = move[0] if move.endswith("wild") or move.endswith("wild_draw_4") else None
        assert named_row.tolist() == [float(c == named) for c in COLORS], move
        # A wild's colour is the one it names; a coloured card's its own; a draw's none.
        colour = named or (move[0] if move != "draw" else None)
        assert suit_row.tolist() == [float(c == colour) for c in COLORS], move


def test_the_history_says_how_lately_each_seat_drew_facing_each_colour(
    states: list[dict[str, Any]],
) -> None:
    """`History.recency` (the state's last 2 seats x 7 kinds x 4 colours): how lately each
    seat made each kind of move facing each colour, 1 / (1 + its moves since), read past the
    last 8 moves the history lists one by one; nothing it did not do."""
    a = load_adapter(CANDIDATES).inner
    kinds = [k.name for k in GAME.kinds]
    early = [[0, "r-7", "r"], [1, "draw", "r"], [0, "g-7", "r"], [1, "g-skip", "g"],
             [1, "draw", "g"]]  # fmt: skip
    late = [[0, "draw", "b"], [1, "y-5", "y"]] * 4  # the last 8: the early ones are older
    state = {**states[0], "current_player": 0, "moves": early + late}
    size = 2 * len(kinds) * len(COLORS)
    want = np.zeros((2, len(kinds), len(COLORS)), np.float32)
    for seat, kind, colour, value in [
        (0, "draw", "b", 1.0), (0, "number", "r", 1 / 5),  # its g-7 facing red, 4 moves ago
        (1, "number", "y", 1.0), (1, "draw", "g", 1 / 5), (1, "skip", "g", 1 / 6),
        (1, "draw", "r", 1 / 7),  # the opponent drew facing red 6 of its moves ago
    ]:  # fmt: skip
        want[seat, kinds.index(kind), COLORS.index(colour)] = value
    obs, _ = a.encode_candidates(state)
    assert obs[-size:].tolist() == want.reshape(-1).tolist()
    # From the other seat the same moves, round the table from it.
    obs, _ = a.encode_candidates({**state, "current_player": 1})
    assert obs[-size:].tolist() == want[::-1].reshape(-1).tolist()


def hand_made_refuses(state: dict[str, Any]) -> bool:
    try:
        load_adapter("uno").encode(state)
    except InvalidState:
        return True
    return False


# (change, the toolkit's reason, whether the hand-made adapter refuses it too: it does not
# check a legal move against the hand, a lone 0's copies, nor the played cards' copies)
@pytest.mark.parametrize(
    ("change", "why", "hand_made"),
    [
        (lambda s: {"legal_actions": ["y-9" if "y-9" not in s["hand"] else "b-9"]},
         "not in the hand", False),
        (lambda s: {"hand": ["r-0", "r-0"]}, "more copies", False),
        (lambda s: {"played_cards": ["r-1"] * 3}, "more copies", False),
        (lambda s: {"hand": ["r-5"] * 3}, "more copies", True),
        (lambda s: {"hand": [*s["hand"], "x-5"]}, "unknown card", True),
        (lambda s: {"target": "r-11"}, "unknown card", True),
        (lambda s: {"color": "p"}, "'color' must be one of", True),
        (lambda s: {"moves": [[0, "r-7"]]}, "\\[seat, move, in force\\]", True),
        (lambda s: {"moves": [[0, "r-7", "p"]]}, "in force is one of", True),
        (lambda s: {"moves": [[2, "r-7", "r"]]}, "0..1", True),
        (lambda s: {"moves": [[0, "r-77", "r"]]}, "not a move", True),
        (lambda s: {"current_player": 2}, "0..1", True),
        (lambda s: {"num_cards": [7]}, "one entry per seat", True),
        (lambda s: {"hand": "r-1"}, "list", True),
    ],
)  # fmt: skip
def test_the_checks_refuse_what_the_game_cannot_have(
    states: list[dict[str, Any]], change: Any, why: str, hand_made: bool
) -> None:
    state = next(s for s in states if len(s["hand"]) == 7 and s["moves"])
    bad = {**state, **change(state)}
    with pytest.raises(InvalidState, match=why):
        load_adapter(FIXED).encode(bad)
    with pytest.raises(InvalidState, match=why):
        load_adapter(CANDIDATES).encode(bad)
    assert hand_made_refuses(bad) == hand_made, bad


def test_declared_in_under_100_lines_and_trained_with_the_hand_made_preset() -> None:
    lines = (ROOT / "src/croupier/games/uno_cards.py").read_text().splitlines()
    assert len(lines) < 100, len(lines)
    assert preset_for(CANDIDATES) == preset_for("uno")
    assert load_simulator(CANDIDATES).name == "uno"  # the engine's own table


# --- the schema, held to the checks (schemathesis's generators) ---------------------------------


def semantics(state: dict[str, Any]) -> bool:
    """What the schema cannot say, written apart from the toolkit: legal moves are made of
    cards in the hand (a wild naming any colour: a wild of any printed colour), and the hand
    and the played cards together hold no more of a card than RLCard's deck."""

    def card(c: str) -> str:
        return c.split("-", 1)[1] if "wild" in c and "-" in c[:2] else c

    hand = Counter(map(card, state["hand"]))
    held = hand + Counter(map(card, state["played_cards"]))
    copies = {c: n for c, n in zip(GAME.deck.cards, GAME.deck.card_copies, strict=True)}
    return all(held[c] <= copies[c] for c in held) and all(
        hand[card(m)] > 0 for m in state["legal_actions"] if m != "draw"
    )


EXAMPLES = 30


@pytest.mark.integration  # in-process, ~10 s of CPU (generation)
def test_what_the_schema_admits_the_game_takes_unless_a_semantic_check_fails() -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import admitted_states_taken

    seen = admitted_states_taken(load_adapter(FIXED), semantics, EXAMPLES)
    assert seen[True] > 0, seen
    print(f"\ntaken {seen[True]}, refused {seen[False]}")


@pytest.mark.integration
def test_what_the_schema_refuses_the_game_refuses() -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import refused_states_refused

    refused, boundary = refused_states_refused(load_adapter(FIXED), EXAMPLES)
    assert refused >= EXAMPLES // 3 + boundary // 2, (refused, boundary)


# --- served ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("game", [CANDIDATES, FIXED])
def test_a_round_is_served_to_the_uno_engine(inprocess, game: str) -> None:
    """The engine's own UNO table against the toolkit's heads: learned and the rules, every
    answer legal, each hand ended (episodes kept); a state it could not send: a 422."""
    table = load_simulator("uno")
    seats = {"0": "learned", "1": "rules"}

    async def body(client, service):
        answers = []
        for hand in range(1):
            table.reset(hand)
            r = await client.post("/v1/games", json={"game": "uno", "seats": seats})
            assert r.status_code == 201, r.text
            await play_hand(client, table, r.json()["game_id"],
                            on_decision=lambda _, a: answers.append(a["policy"]))  # fmt: skip
        table.reset(9)
        r = await client.post("/v1/games", json={"game": "uno", "seats": seats})
        state = table.state(table.current_player())
        bad = await client.post(
            f"/v1/games/{r.json()['game_id']}/decide",
            json={"seat": str(table.current_player()), "state": {**state, "hand": ["r-0"] * 2}},
        )
        return answers, service.outbox.stats()["recorded"], bad.status_code

    answers, recorded, bad = inprocess(body, game=game)
    assert {"learned", "rules"} <= set(answers) and recorded > 0
    assert bad == 422


# --- measured beside the hand-made features (`bench strength --adapter`) -------------------------


def test_bench_strength_serves_trains_and_scores_the_adapter_on_the_uno_table(
    monkeypatch, tmp_path
) -> None:
    """`--game uno --adapter X`: the external run (trainer, server, engine: `--game X`, whose
    table is UNO's) and the rules' record go through X; an adapter of another game is a clear
    error before any run."""
    import croupier.bench.evaluate as evaluate
    import croupier.demo as demo
    from croupier.bench import strength
    from croupier.bench.strength import StrengthRun

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def record(game, hands, seed=0):
        seen["record"] = game
        return {"mean": 0.0}

    def external(run):
        seen["external"] = run.game
        raise Stop

    monkeypatch.setattr(evaluate, "rules_record", record)
    monkeypatch.setattr(demo, "run_external", external)
    with pytest.raises(Stop):
        strength.bench_strength(StrengthRun(game="uno", adapter=CANDIDATES), tmp_path)
    assert seen == {"record": CANDIDATES, "external": CANDIDATES}
    doudizhu = "croupier.games.doudizhu_cards:DoudizhuCardsCandidates"
    with pytest.raises(ValueError, match="an adapter of 'uno' on its table"):
        strength.bench_strength(StrengthRun(game="uno", adapter=doudizhu), tmp_path)
    # the built-in uno against its own table: fine (the same game, the same table)
    strength.same_table(StrengthRun(game="uno", adapter="croupier.games.uno:UnoAdapter"))


def rules_could(state: dict[str, Any]) -> set[str]:
    """The moves uno-rule-v1 may make (it draws at random among them): a forced draw; the
    wild draw 4 naming the colour held most; else any legal card that is not a wild."""
    legal = state["legal_actions"]
    if "draw" in legal:
        return {"draw"}
    four = [m for m in legal if m.endswith("wild_draw_4")]
    if four:
        held = Counter(c[0] for c in state["hand"] if "wild" not in c)
        return {m for m in four if held[m[0]] == max(held.values())} if held else set(four)
    return {m for m in legal if "wild" not in m} or set(legal)


def test_the_rules_clone_through_the_declaration_plays_as_the_rules() -> None:
    """The trainer's first version (`rules_anchor.distil`) fitted through the declared
    features plays as the rules on deals it never saw: its greedy move is one the rules may
    make, over the decisions where the rules rule some legal move out (uno-rule-v1 draws at
    random among the rest, so agreement with its one draw says little: an untrained module
    agreed 0.75-0.78 of all decisions, the clone 0.77-0.80). Measured here, 1,500 decisions
    x 3 epochs, distil seeds 0/1/2: 0.825 / 0.849 / 0.841 (~165 decisions each; an
    untrained module 0.21 / 0.09 / 0.49); 0.70 is ~4 binomial s.d. below the lowest."""
    from croupier.bench.evaluate import policy_player
    from croupier.games.base import rules_seeded
    from croupier.trainer.algo import training_defaults
    from croupier.trainer.rules_anchor import RulesAnchor
    from croupier.trainer.rules_clone import distil

    spec, _ = training_defaults(CANDIDATES, None, {})
    anchor = RulesAnchor(clone_decisions=1500, clone_max_decisions=1500, clone_epochs=3)
    weights, report = distil(CANDIDATES, spec, anchor)
    assert report["decisions"] >= 1500
    clone = policy_player(CANDIDATES, spec, weights, explore=False)
    table, rules = load_simulator("uno"), load_adapter("uno").rules()
    told = agreed = 0
    with rules_seeded(99):
        for hand in range(60):
            table.reset(99_000 + hand)  # deals distil never played (its own seeded draws)
            while not table.is_over():
                state = table.state(table.current_player())
                could = rules_could(state)
                if len(could) < len(set(state["legal_actions"])):
                    told += 1
                    agreed += clone(state) in could
                table.step(rules(state))
    assert told > 100 and agreed / told > 0.70, (agreed, told)


# --- what the toolkit gained for UNO, on a toy declaration ---------------------------------------


def test_the_toolkit_features_uno_needed_work_for_any_game() -> None:
    """A separator and aliases in the deck, a kind's own ranks and named choice, repeated
    legal listings, a history's state in force: sizes, slots, checks, schema, refusals."""
    import dataclasses
    import re

    from croupier.games.cards import CardGame, Deck, Hand, History, Kind, Seat

    deck = Deck(ranks="789", suits="ab", sep="-", jokers=("J",), copies=2, aliases={"a-J": "J"})
    kinds = (Kind("play", (1, 1), ranks=("7", "8")),
             Kind("joker", (1, 1), ranks=("J",), choices=("a", "b")), Kind("pass"))  # fmt: skip
    game = CardGame(name="toy", deck=deck, kinds=kinds, repeated_legal=True,
                    zones=(Seat("seat"), Hand("hand", max_cards=9),
                           History("moves", last=2, then=("x", "y"))))  # fmt: skip
    assert deck.cards == ("7-a", "7-b", "8-a", "8-b", "9-a", "9-b", "J")
    assert game.num_actions == 4 + 2 + 1 and game.choices == ("a", "b")
    slots = {
        game.slot(game.move(m, "m"))
        for m in (
            "play 7-a",
            "play 7-b",
            "play 8-a",
            "play 8-b",
            "joker:a J",
            "joker:b a-J",
            "pass",
        )
    }
    assert slots == set(range(7))  # fmt: skip
    for bad, why in (("play 9-a", "made of"), ("joker J", "names one of"),
                     ("play:a 7-a", "names one of"), ("joker:c J", "names one of"),
                     ("play b-7", "unknown card")):  # fmt: skip
        with pytest.raises(InvalidState, match=why):
            game.move(bad, "m")
    pattern = re.compile(game.move_pattern())
    assert pattern.match("joker:a a-J") and pattern.match("play 7-a")
    assert not pattern.match("joker J") and not pattern.match("play a-7")
    state = {"seat": 1, "hand": ["7-a", "7-a", "a-J"], "legal_actions": ["play 7-a"] * 2 +
             ["joker:b J"], "moves": [[0, "joker:a J", "y"], [1, "pass", "x"]]}  # fmt: skip
    assert jsonschema_rs.Draft202012Validator(game.state_schema()).is_valid(state)
    p = game.parse(state)
    obs = game.features(p)
    move = game.move_size + 2  # seat round the table, kind, cards, choice | in force
    assert move == 2 + 3 + 7 + 2 + 2 and obs.size == game.obs_size
    newest, older = obs[-2 * move : -move], obs[-move:]
    assert newest[:2].tolist() == [1, 0] and newest[-2:].tolist() == [1, 0]  # pass, facing x
    assert older[:2].tolist() == [0, 1] and older[-4:].tolist() == [1, 0, 0, 1]  # J naming a
    rows = game.candidates(p)  # ... | choice | suits | what it keeps of its suits, ranks
    assert rows[:, -6:-4].tolist() == [[0, 0], [0, 0], [0, 1]]
    assert rows[:, -4:-2].tolist() == [[1, 0], [1, 0], [0, 1]]  # the joker's: the one named
    kept = np.float16(1 / 3)  # (each candidate feature the nearest float16)
    np.testing.assert_array_equal(rows[:, -2:], [[kept, kept], [kept, kept], [0, 0]])
    with pytest.raises(InvalidState, match="more copies"):  # an alias is the card it names
        game.parse({**state, "hand": ["J", "a-J", "J"]})
    with pytest.raises(InvalidState, match="twice"):
        dataclasses.replace(game, repeated_legal=False).parse(state)
    for broken in (lambda: Deck(ranks="7", suits="ab", aliases={"a-7": "Q"}),
                   lambda: Deck(ranks="7", suits="ab", aliases={"7a": "7b"}),
                   lambda: CardGame(name="x", deck=deck, zones=(Hand("hand"),),
                                    kinds=(Kind("play", (1, 1), ranks=("Q",)),)),
                   lambda: CardGame(name="x", deck=deck, zones=(Hand("hand"),),
                                    kinds=(Kind("play", (1, 1), choices=("a b",)),))):  # fmt: skip
        with pytest.raises(ValueError):
            broken()

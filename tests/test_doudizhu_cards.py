"""Doudizhu declared through the card-game toolkit (`games/doudizhu_cards.py`), held to the
hand-made `games/doudizhu.py`: it reads the engine's own JSON (every state RLCard's game
produces, random and rules play), each of the game's 27,472 moves reads into a kind and a card
set and back, features finite and of the declared sizes, the checks refuse what the hand-made
adapter refuses that JSON Schema cannot say, the state's schema held to the checks both ways
(schemathesis's generators, as `test_cards.py`), and a short round served."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema_rs
import numpy as np
import pytest
from rlcard.games.doudizhu.utils import ACTION_2_ID, ID_2_ACTION

from croupier.games.base import InvalidState
from croupier.games.candidates import is_candidate_game
from croupier.games.doudizhu import (
    ACTION_CODES,
    ACTION_COUNTS,
    ACTION_KINDS,
    BEATS,
    MOVE_KINDS,
    move_to_beat,
)
from croupier.games.doudizhu_cards import GAME, read_move
from croupier.games.presets import preset_for
from croupier.games.registry import load_adapter, load_simulator
from croupier.games.simulator import mixed_play_states
from tests.helpers.hands import play_hand

ROOT = Path(__file__).resolve().parent.parent
FIXED = "croupier.games.doudizhu_cards:DoudizhuCards"
CANDIDATES = "croupier.games.doudizhu_cards:DoudizhuCardsCandidates"
RANKS = "3456789TJQKA2BR"


def engine_states(hands: int, seed: int = 7) -> list[dict[str, Any]]:
    """States as `croupier engine --game doudizhu` sends them: half the moves the rules',
    half random, so both the rules' games and odd ones are in."""
    game = "doudizhu"
    return mixed_play_states(load_simulator(game), load_adapter(game).rules(), hands, seed)


@pytest.fixture(scope="module")
def states() -> list[dict[str, Any]]:
    states = engine_states(12)
    assert len(states) > 300
    return states


def test_every_move_of_the_game_reads_into_its_kind_and_cards_and_back() -> None:
    """All 27,472 moves: the kind RLCard's table gives (as the hand-made move context names
    it), the cards as counted per rank by the hand-made tables, and the toolkit's spelling
    joined back is the engine's move."""
    for i, move in enumerate(ID_2_ACTION):
        text = read_move(move)
        m = GAME.move(move, "legal_actions")
        kind = MOVE_KINDS[int(np.argmax(ACTION_KINDS[i, : len(MOVE_KINDS)]))]
        assert GAME.kinds[m.kind].name == kind, move
        # suitless deck: card k is rank k
        np.testing.assert_array_equal(m.counts, ACTION_COUNTS[i], err_msg=move)
        assert "".join(text.split(" ")[1:]) == ("" if move == "pass" else move)
    assert len({GAME.kinds[GAME.move(m, "x").kind].name for m in ID_2_ACTION}) == len(GAME.kinds)
    with pytest.raises(InvalidState, match="not a move of doudizhu"):
        GAME.move("34", "legal_actions")


def test_every_engine_state_is_read_by_both_heads_as_the_hand_made_adapter_reads_it(
    states: list[dict[str, Any]],
) -> None:
    fixed, cands = load_adapter(FIXED), load_adapter(CANDIDATES)
    hand_made = load_adapter("doudizhu")
    assert (fixed.name, cands.name, fixed.num_players) == ("doudizhu", "doudizhu", 3)
    assert is_candidate_game(cands) and fixed.payoff_range == hand_made.payoff_range
    validator = jsonschema_rs.Draft202012Validator(fixed.state_schema())
    hand_made_schema = jsonschema_rs.Draft202012Validator(hand_made.state_schema())
    assert set(fixed.state_schema()["required"]) == set(hand_made.state_schema()["required"])
    most = 0
    for state in states:
        assert validator.is_valid(state), [e.message for e in validator.iter_errors(state)]
        assert hand_made_schema.is_valid(state)
        legal = state["legal_actions"]
        obs, mask = fixed.encode(state)
        assert obs.shape == (fixed.obs_size,) and mask.shape == (fixed.num_actions,)
        assert np.isfinite(obs).all() and obs.min() >= 0 and obs.max() <= 1
        slots = [fixed.action_index(m, state) for m in legal]
        assert all(mask[s] == 1 for s in slots) and mask.sum() == len(set(slots))
        assert all(fixed.action_value(s, state) in legal for s in slots)
        obs2, rows = cands.encode(state)
        np.testing.assert_array_equal(obs, obs2)
        assert rows.shape == (len(legal), cands.candidate_size) and np.isfinite(rows).all()
        assert [cands.inner.candidate_value(k, state) for k in range(len(legal))] == legal
        # the same teams as the hand-made adapter: the landlord alone
        assert fixed.teams(state) == hand_made.teams(state)
        most = max(most, len(legal))
    assert most > 10  # some states list many moves (the slot check above is not trivial)


def test_the_features_say_what_the_state_holds(states: list[dict[str, Any]]) -> None:
    """The landlord's seat round the table from the acting one, the hand's counts per rank
    out of the deck's copies, and the move to beat in each candidate's answer features."""
    a = load_adapter(CANDIDATES).inner
    state = next(s for s in states if s["self"] != s["landlord"] and s["trace"][-1][1] != "pass")
    obs, rows = a.encode_candidates(state)
    o = 0
    assert obs[o + (state["landlord"] - state["self"]) % 3] == 1.0 and obs[:3].sum() == 1
    o += 3
    held = Counter(state["current_hand"])
    expected = [held[r] / (1 if r in "BR" else 4) for r in RANKS]
    np.testing.assert_allclose(obs[o : o + 15], expected)
    assert obs[o + 15] == pytest.approx(len(state["current_hand"]) / 20)
    # answering the last move (not leading), each move the same number of cards as it or not
    answer = rows[:, -10:-2]  # | how it answers | what it keeps (a suitless deck: no suits)
    assert (answer[:, 0] == 0).all()
    size = [len(m) if m != "pass" else 0 for m in state["legal_actions"]]
    assert answer[:, 7].tolist() == [float(n == len(state["trace"][-1][1])) for n in size]
    # after two passes the seat leads: nothing to answer
    lead = next(s for s in states if len(s["trace"]) > 2 and s["trace"][-1][1] == "pass"
                and s["trace"][-2][1] == "pass")  # fmt: skip
    assert (a.encode_candidates(lead)[1][:, -10] == 1).all()


def hand_made_refuses(state: dict[str, Any]) -> bool:
    try:
        load_adapter("doudizhu").encode(state)
    except InvalidState:
        return True
    return False


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda s: {"legal_actions": ["pass", "BR"] if "B" not in s["current_hand"] else ["34"]},
            "not in the hand|not a move",
        ),  # fmt: skip
        (lambda s: {"current_hand": s["current_hand"] + s["others_hand"][0]}, "more copies"),
        (lambda s: {"current_hand": "33333" + s["current_hand"][5:]}, "more copies"),
        (lambda s: {"current_hand": "BB" + s["current_hand"][2:]}, "more copies"),
        (lambda s: {"trace": [[0, "33x"]]}, "not a move"),
        (lambda s: {"trace": [[3, "pass"]]}, "0..2"),
        (lambda s: {"landlord": 3}, "0..2"),
        (lambda s: {"played_cards": ["", ""]}, "one entry per seat"),
        (lambda s: {"num_cards_left": [17, 17, 21]}, "in \\[0, 20\\]"),
        (lambda s: {"legal_actions": [s["legal_actions"][0]] * 2}, "twice"),
        (lambda s: {"current_hand": ["3"]}, "string"),
    ],
)
def test_the_checks_refuse_what_the_hand_made_adapter_refuses(
    states: list[dict[str, Any]], change: Any, why: str
) -> None:
    state = next(s for s in states if len(s["current_hand"]) == 17 and s["trace"])
    bad = {**state, **change(state)}
    assert hand_made_refuses(bad), bad  # (the state is bad for the hand-made reading too)
    with pytest.raises(InvalidState, match=why):
        load_adapter(FIXED).encode(bad)
    with pytest.raises(InvalidState, match=why):
        load_adapter(CANDIDATES).encode(bad)


def test_declared_in_under_100_lines_and_trained_with_the_hand_made_preset() -> None:
    lines = (ROOT / "src/croupier/games/doudizhu_cards.py").read_text().splitlines()
    assert len(lines) < 100, len(lines)
    assert preset_for(CANDIDATES) == preset_for("doudizhu")
    assert load_simulator(CANDIDATES).name == "doudizhu"  # the engine's own table


# --- the schema, held to the checks (schemathesis's generators) ---------------------------------


def semantics(state: dict[str, Any]) -> bool:
    """What the schema cannot say, written apart from the toolkit: moves are the game's own,
    legal moves are made of cards in the hand and may answer the move to beat (the hand-made
    adapter's table), the hand holds the seat's count, and the hands and the played cards
    together hold no more of a card than the deck."""
    moves = [*state["legal_actions"], *(m for _, m in state["trace"])]
    if not all(isinstance(m, str) and m in ACTION_2_ID for m in moves):
        return False
    if len(state["current_hand"]) != state["num_cards_left"][int(state["self"])]:
        return False
    beat = move_to_beat([ACTION_2_ID[m] for _, m in state["trace"][-2:]])
    to_beat = 0 if beat is None else ACTION_CODES[beat]
    if not all(BEATS[to_beat, ACTION_CODES[ACTION_2_ID[m]]] for m in state["legal_actions"]):
        return False
    hand = Counter(state["current_hand"])
    held = hand + Counter(state["others_hand"]) + Counter("".join(state["played_cards"]))
    return all(held[r] <= (1 if r in "BR" else 4) for r in RANKS) and all(
        Counter(m) <= hand for m in state["legal_actions"] if m != "pass"
    )


EXAMPLES = 30  # lookahead patterns make doudizhu's states ~10x dearer to generate


@pytest.mark.integration  # in-process, ~10-20 s of CPU (generation)
def test_what_the_schema_admits_the_game_takes_unless_a_semantic_check_fails(
    states: list[dict[str, Any]],
) -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import admitted_states_taken

    adapter = load_adapter(FIXED)
    seen = admitted_states_taken(adapter, semantics, EXAMPLES)
    # Both ways: random states rarely list only moves that beat their trace, so the engine's
    # own states, admitted and semantic, are taken too (and the refusals above are checked).
    validator = jsonschema_rs.Draft202012Validator(adapter.state_schema())
    for state in states[::20]:
        assert validator.is_valid(state) and semantics(state), state
        adapter.encode(state)
        seen[True] += 1
    assert seen[True] > 0 and seen[False] > 0, seen
    print(f"\ntaken {seen[True]}, refused {seen[False]}")


@pytest.mark.integration
def test_what_the_schema_refuses_the_game_refuses() -> None:
    pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
    from tests.helpers.state_schema import refused_states_refused

    refused, boundary = refused_states_refused(load_adapter(FIXED), EXAMPLES)
    assert refused >= EXAMPLES // 3 + boundary // 2, (refused, boundary)


# --- served ---------------------------------------------------------------------------------------


def test_a_round_is_served_to_the_doudizhu_engine(inprocess) -> None:
    """The engine's own doudizhu table (`--game doudizhu`) against the toolkit's candidates:
    a learned landlord and the rules, every answer legal, each hand ended (episodes kept)."""
    table = load_simulator("doudizhu")

    async def body(client, service):
        answers = []
        for hand in range(2):
            table.reset(hand)
            landlord = table.roles().index("landlord")
            seats = {str(s): "learned" if s == landlord else "rules" for s in range(3)}
            r = await client.post("/v1/games", json={"game": "doudizhu", "seats": seats})
            assert r.status_code == 201, r.text
            game_id = r.json()["game_id"]
            await play_hand(
                client, table, game_id, on_decision=lambda _, a: answers.append(a["policy"])
            )
        # a state the engine could not send: a 422, not an answer
        table.reset(9)
        r = await client.post("/v1/games", json={"game": "doudizhu", "seats": seats})
        state = table.state(table.current_player())
        bad = await client.post(
            f"/v1/games/{r.json()['game_id']}/decide",
            json={"seat": str(table.current_player()),
                  "state": {**state, "current_hand": "BB" + state["current_hand"][2:]}},
        )  # fmt: skip
        return answers, service.outbox.stats()["recorded"], bad.status_code

    answers, recorded, bad = inprocess(body, game=CANDIDATES)
    assert {"learned", "rules"} <= set(answers) and recorded > 0
    assert bad == 422


# --- measured beside the hand-made features (`bench strength --adapter`) -------------------------


def test_bench_strength_serves_and_trains_the_adapter_given_and_plays_the_same_engine(
    monkeypatch, tmp_path
) -> None:
    """`--adapter`: the trainer and the server run it (`--game <adapter>`), the engine still
    plays `doudizhu` (its create names the game the adapter declares); an adapter that is not
    doudizhu's, or one for another game, is a clear error."""
    from croupier.bench import strength
    from croupier.bench.strength import StrengthRun

    seen: dict[str, list[str]] = {}

    class Stop(Exception):
        pass

    def serving(args):
        seen["serve"] = args
        raise Stop

    monkeypatch.setattr(
        strength, "start_train", lambda args, stdout: seen.setdefault("train", args)
    )
    monkeypatch.setattr(strength, "serving", serving)
    monkeypatch.setattr(strength, "stop", lambda proc: None)
    run = StrengthRun(adapter=CANDIDATES)
    with pytest.raises(Stop):
        strength.run_external(run, tmp_path)
    for who in ("train", "serve"):
        assert seen[who][seen[who].index("--game") + 1] == CANDIDATES, seen[who]
    assert run.game == "doudizhu"  # what the engine plays (`_play` passes run.game)

    with pytest.raises(ValueError, match="a doudizhu adapter"):
        strength.bench_strength(StrengthRun(adapter="tests.test_cards:ToyCandidates"), tmp_path)
    # (another game's adapter is measured on that game's table: its own name and table)
    with pytest.raises(ValueError, match="an adapter of 'uno' on its table"):
        strength.bench_strength(StrengthRun(game="uno", adapter=CANDIDATES), tmp_path)


def test_the_in_process_anchor_trains_and_evaluates_through_the_toolkit() -> None:
    """The anchor's PPO on the toolkit's features: RLCard's raw states read as the engine
    sends them (`as_sent`), whole updates, and an evaluation over fixed deals."""
    from experiments.strength_anchors import PPOConfig, train

    cfg = PPOConfig(adapter=CANDIDATES, hiddens=[32], score_hidden=16, decisions_per_update=400,
                    minibatch=200, parallel_games=8, minutes=5, max_decisions=800,
                    eval_every_s=1e9, eval_games=5, final_games=20, seed=1)  # fmt: skip
    result = train(cfg, log=lambda _line: None)
    assert result["decisions"] >= 800
    for how in ("greedy", "sampled"):
        assert result["final"][how]["games"] == 20
        assert 0 <= result["final"][how]["win_rate"] <= 1


def test_the_bench_command_passes_the_adapter_on(monkeypatch) -> None:
    from typer.testing import CliRunner

    from croupier.bench import strength
    from croupier.cli import app

    runs = []
    monkeypatch.setattr(strength, "bench_strength", lambda run, out: runs.append(run) or {})
    monkeypatch.setattr(strength, "format_report", lambda report: "ok")
    args = ["bench", "strength", "--game", "doudizhu", "--adapter", CANDIDATES, "--minutes", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert runs[0].adapter == CANDIDATES and runs[0].served == CANDIDATES
    assert runs[0].game == "doudizhu"


def test_the_rules_clone_through_the_declaration_plays_as_the_rules() -> None:
    """The trainer's first version (`rules_anchor.distil`) fitted through the declared
    features agrees with the rules on deals it never saw: the features tell the rules' moves
    apart. (20,000 decisions: 0.985 here, 0.991 through the hand-made features. At this
    test's 4,000 the held-out agreement spreads 0.950-0.975 over distil seeds, CPUs and
    RLCard's set-ordered legal moves, which differ with the hash seed; 400 decisions for
    one epoch give 0.51-0.73, so 0.92 still tells a fitted clone from a half-fitted one.)"""
    import torch

    from croupier.trainer.algo import training_defaults
    from croupier.trainer.rules_anchor import RulesAnchor
    from croupier.trainer.rules_clone import clone_fit, distil, rules_decisions

    spec, _ = training_defaults(CANDIDATES, None, {})
    anchor = RulesAnchor(clone_decisions=4000, clone_max_decisions=4000, clone_epochs=6)
    weights, report = distil(CANDIDATES, spec, anchor)
    adapter = load_adapter(CANDIDATES)
    module = spec.rl_module_spec(adapter.observation_space, adapter.action_space).build()
    module.load_state_dict({k: torch.as_tensor(v) for k, v in weights.items()})
    module.eval()
    held_out = clone_fit(module, rules_decisions(CANDIDATES, 1500, seed=1, gamma=1.0))
    assert report["decisions"] >= 4000
    assert held_out["greedy_agreement"] > 0.92, held_out

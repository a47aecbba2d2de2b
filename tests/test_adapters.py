"""Game adapters against RLCard's own encodings, their validation, and request routing."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import numpy as np
import pytest
import rlcard

from croupier.client import route_game
from croupier.engine.rlcard_games import to_json
from croupier.games.base import InvalidState, rules_seeded
from croupier.games.leduc import LeducAdapter
from croupier.games.registry import load_adapter
from croupier.games.uno import UnoAdapter, UnoBasicAdapter
from croupier.games.vector import VectorAdapter

ADAPTERS = {"leduc-holdem": LeducAdapter(), "uno": UnoAdapter()}
# The adapters whose observation is RLCard's own `obs` (UNO's default one sees more).
RLCARD_ENCODINGS = {"leduc-holdem": LeducAdapter(), "uno": UnoBasicAdapter()}


def rlcard_states(game: str, hands: int, seed: int, max_steps: int = 400):
    """(rlcard extracted state, JSON raw state) for every decision of random-play hands."""
    env = rlcard.make(game, config={"seed": seed})
    rng = random.Random(seed)
    for _ in range(hands):
        state, player = env.reset()
        for _ in range(max_steps):
            if env.is_over():
                break
            yield state, to_json(state["raw_obs"])
            state, player = env.step(rng.choice(state["raw_legal_actions"]), raw_action=True)


@pytest.mark.parametrize("game", list(RLCARD_ENCODINGS))
def test_encoding_matches_rlcard(game):
    adapter = RLCARD_ENCODINGS[game]
    n = 0
    for rl_state, raw in rlcard_states(game, hands=60, seed=7):
        obs, mask = adapter.encode(raw)
        assert obs.dtype == np.float32 and obs.shape == (adapter.obs_size,)
        np.testing.assert_array_equal(obs, np.asarray(rl_state["obs"], np.float32).reshape(-1))
        assert mask.dtype == np.float32 and mask.shape == (adapter.num_actions,)
        assert sorted(np.flatnonzero(mask).tolist()) == sorted(rl_state["legal_actions"])
        for a in raw["legal_actions"]:
            i = adapter.action_index(a, raw)
            assert adapter.action_value(i, raw) == a
            assert mask[i] == 1.0
        n += 1
    assert n > 100


@pytest.mark.parametrize("game", list(ADAPTERS))
def test_action_round_trip(game):
    adapter = ADAPTERS[game]
    for i in range(adapter.num_actions):
        assert adapter.action_index(adapter.action_value(i, {}), {}) == i
    with pytest.raises(InvalidState):
        adapter.action_value(adapter.num_actions, {})
    with pytest.raises(InvalidState):
        adapter.action_index("nope", {})


@pytest.mark.parametrize("game", list(ADAPTERS))
def test_legal_masks_are_built_once_shared_read_only_and_still_checked(game):
    adapter = ADAPTERS[game]
    names = list(adapter.action_names[:3])
    first = adapter.legal_mask(names)
    assert adapter.legal_mask(list(names)) is first  # the same set: the same mask
    assert not first.flags.writeable  # shared by every decision with this set
    with pytest.raises(ValueError):
        first[0] = 0.0
    # Whatever a cached set's tuple would also match is refused as before.
    for bad in ({n: 1 for n in names}, tuple(names), [*names, "nope"], [names[0], ["x"]], []):
        with pytest.raises(InvalidState):
            adapter.legal_mask(bad)

    class FewMasks(type(adapter)):
        MASKS_CACHED = 2

    few = FewMasks()
    sets = [list(adapter.action_names[i : i + 2]) for i in range(3)]
    for legal in sets * 2:
        assert np.flatnonzero(few.legal_mask(legal)).tolist() == [
            adapter.action_names.index(a) for a in legal
        ]
    assert len(FewMasks._masks) == 2  # bounded: the rest are built each time


def test_leduc_action_order_is_rlcards():
    env = rlcard.make("leduc-holdem")
    assert [LeducAdapter().action_value(i, {}) for i in range(4)] == env.actions


@pytest.mark.parametrize("game", list(ADAPTERS))
def test_rules_pick_legal_actions(game):
    rules = ADAPTERS[game].rules()
    assert rules is not None
    for _, raw in rlcard_states(game, hands=10, seed=3):
        action = rules(raw)
        assert isinstance(action, str) and action in raw["legal_actions"]


@pytest.mark.parametrize("game", [*ADAPTERS, "doudizhu"])
def test_checked_rules_play_as_the_checking_rules(game):
    """The server's rules seats act through `checked_rules` (the state already checked): the
    same moves as `rules()`, which validates first, under the same random stream."""
    adapter = load_adapter(game)
    for _, raw in rlcard_states(game, hands=6, seed=5):
        adapter.check(raw)
        with rules_seeded(1):
            checking = adapter.rules()(raw)
        with rules_seeded(1):
            assert adapter.checked_rules()(raw) == checking


def test_describe_reports_rules():
    assert LeducAdapter().describe()["has_rules"] and UnoAdapter().describe()["has_rules"]


LEDUC = {
    "hand": "SJ",
    "public_card": None,
    "all_chips": [2, 1],
    "my_chips": 1,
    "legal_actions": ["call", "raise", "fold"],
    "current_player": 1,
}
UNO = {
    "hand": ["r-1", "r-1", "b-wild", "g-skip"],
    "target": "b-5",
    "played_cards": ["b-5"],
    "legal_actions": ["b-wild", "r-wild", "g-wild", "y-wild"],
    "num_cards": [4, 7],
    "num_players": 2,
    "current_player": 0,
}


def changed(base: dict, **kw) -> dict:
    s = copy.deepcopy(base)
    for k, v in kw.items():
        if v is ...:
            del s[k]
        else:
            s[k] = v
    return s


def test_leduc_example_encoding():
    obs, mask = LeducAdapter().encode(LEDUC)
    assert np.flatnonzero(obs).tolist() == [0, 6 + 1, 21 + 2]
    assert mask.tolist() == [1, 1, 1, 0]
    obs, _ = LeducAdapter().encode(changed(LEDUC, public_card="HK", all_chips=[4, 14], my_chips=14))
    assert np.flatnonzero(obs).tolist() == [0, 3 + 2, 6 + 14, 21 + 4]


@pytest.mark.parametrize(
    "bad",
    [
        changed(LEDUC, hand=...),
        changed(LEDUC, public_card=...),
        changed(LEDUC, legal_actions=...),
        changed(LEDUC, hand="SA"),
        changed(LEDUC, hand=3),
        changed(LEDUC, public_card="XQ"),
        changed(LEDUC, all_chips="2,1"),
        changed(LEDUC, all_chips=[2, 1, 1]),
        changed(LEDUC, all_chips=[2.5, 1]),
        changed(LEDUC, my_chips="1"),
        changed(LEDUC, my_chips=True, all_chips=[True, 2]),
        changed(LEDUC, my_chips=3),  # not one of all_chips
        changed(LEDUC, all_chips=[15, 1], my_chips=15),
        changed(LEDUC, all_chips=[1, 15]),
        changed(LEDUC, all_chips=[-1, 1]),
        changed(LEDUC, legal_actions=[]),
        changed(LEDUC, legal_actions=["call", "shove"]),
        changed(LEDUC, legal_actions="call"),
        changed(LEDUC, legal_actions=[["call"]]),
        "not a dict",
    ],
)
def test_leduc_invalid_states(bad):
    with pytest.raises(InvalidState):
        LeducAdapter().encode(bad)


@pytest.mark.parametrize(
    "bad",
    [
        changed(UNO, hand=...),
        changed(UNO, target=...),
        changed(UNO, legal_actions=...),
        changed(UNO, hand="r-1"),
        changed(UNO, hand=["r-1", 5]),
        changed(UNO, hand=["r-10"]),
        changed(UNO, hand=["draw"]),
        changed(UNO, hand=["r-1", "r-1", "r-1"]),
        changed(UNO, target="p-5"),
        changed(UNO, target=["b-5"]),
        changed(UNO, legal_actions=[]),
        changed(UNO, legal_actions=["b-six"]),
        changed(UNO, legal_actions="draw"),
        None,
    ],
)
def test_uno_invalid_states(bad):
    with pytest.raises(InvalidState):
        UnoAdapter().encode(bad)
    with pytest.raises(InvalidState):
        UnoBasicAdapter().encode(bad)


def test_uno_wild_copies_are_fine():
    # Recoloured wilds can repeat after a reshuffle; RLCard's encoding ignores their count.
    obs, _ = UnoBasicAdapter().encode(changed(UNO, hand=["r-wild", "r-wild", "r-wild"]))
    assert obs.shape == (240,)
    obs, _ = UnoAdapter().encode(changed(UNO, hand=["r-wild", "r-wild", "r-wild"]))
    assert obs.shape == (UnoAdapter.obs_size,)


def test_rules_reject_invalid_state():
    with pytest.raises(InvalidState):
        LeducAdapter().rules()(changed(LEDUC, legal_actions=[]))
    with pytest.raises(InvalidState):
        UnoAdapter().rules()(changed(UNO, hand=["x"]))


def test_vector_adapter_validation():
    v = VectorAdapter(obs_size=3, num_actions=4)
    obs, mask = v.encode({"obs": [0.0, 1.0, 2.0], "legal_actions": [0, 3]})
    assert obs.tolist() == [0, 1, 2] and mask.tolist() == [1, 0, 0, 1]
    for bad in (
        {"obs": [0.0, 1.0], "legal_actions": [0]},
        {"obs": [0.0, 1.0, 2.0], "legal_actions": []},
        {"obs": [0.0, 1.0, 2.0], "legal_actions": [4]},
        {"obs": [0.0, 1.0, 2.0], "legal_actions": [-1]},
        {"obs": [0.0, 1.0, 2.0]},
    ):
        with pytest.raises(InvalidState):
            v.encode(bad)
    with pytest.raises(InvalidState):
        v.action_index(4, {})


URLS = ["http://a:8000", "http://b:8000", "http://c:8000"]
IDS = [f"game-{i}" for i in range(3000)]


def test_route_game_is_stable_and_spread():
    first = [route_game(g, URLS) for g in IDS]
    assert first == [route_game(g, URLS) for g in IDS]
    assert first == [route_game(g, list(reversed(URLS))) for g in IDS]  # order-free
    for url in URLS:
        assert 0.20 <= first.count(url) / len(IDS) <= 0.47
    with pytest.raises(ValueError):
        route_game("g", [])


def test_route_game_moves_few_keys_on_scale_out():
    before = [route_game(g, URLS) for g in IDS]
    after = [route_game(g, [*URLS, "http://d:8000"]) for g in IDS]
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    # Only keys won by the new server move (~1/4), never between old servers.
    assert all(a == "http://d:8000" for _, a in moved)
    assert 0.15 <= len(moved) / len(IDS) <= 0.35


# --- legal-action lists and the mask cache's memory (issue 14, finding 5) ---------------------


@pytest.mark.parametrize("game", list(ADAPTERS))
def test_legal_lists_longer_than_the_game_or_repeated_are_refused(game):
    adapter = ADAPTERS[game]
    names = list(adapter.action_names)
    with pytest.raises(InvalidState, match="more legal actions"):
        adapter.legal_mask([*names, names[0]])
    with pytest.raises(InvalidState, match="more legal actions"):
        adapter.legal_mask([names[0]] * 40_000)
    if adapter.REPEATED_LEGAL_ACTIONS:  # UNO: RLCard lists a card once per copy held
        assert adapter.legal_mask([names[1], names[1], names[0]]).sum() == 2
    else:
        with pytest.raises(InvalidState, match="twice"):
            adapter.legal_mask([names[1], names[1]])
    v = VectorAdapter(obs_size=2, num_actions=4)
    for bad in ([1, 1], [0, 1, 2, 3, 0]):
        with pytest.raises(InvalidState):
            v.encode({"obs": [0.0, 0.0], "legal_actions": bad})


def test_the_mask_cache_holds_the_games_names_not_the_requests():
    """A cached entry's key is built from the adapter's own strings: the request's list (and
    its strings) are not kept alive by the cache."""

    class Fresh(UnoAdapter):
        pass

    adapter = Fresh()
    legal = json.loads('["r-7", "b-0", "draw"]')  # new string objects, as a request's are
    adapter.legal_mask(legal)
    (key,) = Fresh._masks
    assert key == tuple(legal)
    canonical = {id(a) for a in adapter.action_names}
    assert all(id(a) in canonical for a in key)
    assert not any(a is b for a, b in zip(key, legal, strict=True))


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_huge_legal_lists_do_not_grow_a_real_server():
    """150 decides, each with a different 40,000-name legal list (~48 MB sent): refused 422,
    and the server does not grow (it grew by ~413 MiB when the cache kept each list)."""
    import httpx

    from tests.conftest import running_server_logged

    rng = np.random.default_rng(0)
    names = ["call", "raise", "fold"]
    serve = running_server_logged("--game", "leduc-holdem", "--log-level", "warning")
    with serve as server, httpx.Client(base_url=server.url, timeout=60) as c:
        gid = c.post("/v1/games", json={"game": "leduc-holdem"}).json()["game_id"]
        state = {"hand": "SJ", "public_card": None, "all_chips": [2, 1], "my_chips": 1,
                 "current_player": 0}  # fmt: skip
        decide = f"/v1/games/{gid}/decide"
        for _ in range(5):  # warm: allocator pools, first-request imports
            c.post(decide, json={"seat": "0", "state": {**state, "legal_actions": names}})
        before = _rss_mib(server.proc.pid)
        codes = set()
        for _ in range(150):
            legal = [names[i] for i in rng.integers(0, 3, 40_000)]
            r = c.post(decide, json={"seat": "0", "state": {**state, "legal_actions": legal}})
            codes.add(r.status_code)
        grown = _rss_mib(server.proc.pid) - before
    assert codes == {422}
    assert grown < 60, f"server grew by {grown:.0f} MiB"

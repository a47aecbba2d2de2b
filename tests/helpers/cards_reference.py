"""The card-game toolkit's features written the plain way, a zone and a move at a time, with
no cache and no table: the reference the toolkit's own encode is held to, number for number
(`tests/test_cards_encode.py`). It reads only the declaration (`CardGame`: deck, zones, kinds,
spelling), never the toolkit's parse, caches or move tables, so a fast path that drifts from
these features fails there. A valid state is assumed (the checks are tested elsewhere)."""

from __future__ import annotations

from typing import Any

import numpy as np

from croupier.games.cards import (
    ANSWER_SIZE,
    CardGame,
    Choice,
    Hand,
    History,
    Number,
    Numbers,
    Pile,
    RoleSeat,
    Seat,
    SeatNumbers,
    SeatPiles,
    TopCard,
)


def card_ids(g: CardGame, cards: Any, joined: bool) -> list[int]:
    index = {c: i for i, c in enumerate(g.deck.cards)}
    index.update((alias, index[c]) for alias, c in g.deck.aliases)  # another name, one card
    return [index[c] for c in (list(cards) if joined else cards)]


def counts_of(g: CardGame, ids: list[int]) -> np.ndarray:
    return np.bincount(np.array(ids, np.int64), minlength=g.deck.size)


def count_columns(count: int, copies: int, one_per_copy: bool) -> list[float]:
    """A count of a card (a rank) of `copies`: count / copies, or holds > 0, > 1, ... ."""
    if not one_per_copy:
        return [count / copies]
    return [1.0 if count > j else 0.0 for j in range(copies)]


def card_columns(g: CardGame, counts: np.ndarray) -> list[float]:
    """One set's per-card columns."""
    copies = g.deck.card_copies
    return [x for i in range(g.deck.size)
            for x in count_columns(int(counts[i]), copies[i], g.per_copy)]  # fmt: skip


def set_features(g: CardGame, counts: np.ndarray, max_cards: int) -> np.ndarray:
    """float32[n, set_size]: per card, per rank (a card or a rank of several copies: one
    column per copy with `per_copy`, else count / copies), the jokers' card columns again
    beside the ranks, per suit / the deck's, the size / `max_cards`."""
    d, copies = g.deck, np.array(g.deck.card_copies, np.int64)
    rows = []
    for c in counts:
        row = card_columns(g, c)
        if d.suits:
            ranks, suits = len(d.ranks), len(d.suits)
            plain = ranks * suits
            grid = c[:plain].reshape(ranks, suits)
            grid_copies = copies[:plain].reshape(ranks, suits)
            for r in range(ranks):
                row += count_columns(int(grid[r].sum()), int(grid_copies[r].sum()), g.per_copy)
            for i in range(plain, d.size):
                row += count_columns(int(c[i]), int(copies[i]), g.per_copy)
            row += list(grid.sum(0) / grid_copies.sum(0))
        row.append(c.sum() / max(max_cards, 1))
        rows.append(row)
    return np.array(rows, np.float32).reshape(len(counts), g.set_size)


def read_move(g: CardGame, text: str) -> tuple[int, np.ndarray, list[int]]:
    """(kind, counts, card ids as spelled) of a move."""
    if g.spelling is not None:
        text = g.spelling.read(text)
    name, *cards = text.split(" ")
    ids = card_ids(g, cards, False)
    return [k.name for k in g.kinds].index(name.split(":")[0]), counts_of(g, ids), ids


def read_choice(g: CardGame, text: str) -> int:
    """The index in the game's choices of what a move names ("kind:choice ..."), or -1."""
    if g.spelling is not None:
        text = g.spelling.read(text)
    head = text.split(" ")[0]
    return g.choices.index(head.split(":", 1)[1]) if ":" in head else -1


def zone_value(g: CardGame, z: Any, state: dict[str, Any]) -> Any:
    """What the state says for zone `z`, or its default."""
    if z.field in state:
        return state[z.field]
    if isinstance(z, Pile | SeatPiles | History):
        return None
    if isinstance(z, SeatNumbers):
        return [z.low] * g.players
    if isinstance(z, Numbers):
        return [z.low] * z.length
    if isinstance(z, Number):
        return z.low
    if isinstance(z, Choice):
        return z.options[0]
    return 0


def pile_counts(g: CardGame, z: Any, value: Any) -> tuple[np.ndarray, list[int]]:
    if value is None:
        ids: list[int] = []
    elif isinstance(z, TopCard):
        ids = card_ids(g, [value], False)
    else:
        ids = card_ids(g, value, z.joined)
    return counts_of(g, ids), ids


def state_features(g: CardGame, state: dict[str, Any]) -> np.ndarray:
    seat = next((state.get(z.field, 0) for z in g.zones if isinstance(z, Seat)), 0)
    n = g.players
    parts = []
    for z in g.zones:
        value = zone_value(g, z, state)
        out = np.zeros(z.size(g), np.float32)
        if isinstance(z, RoleSeat):
            out[(value - seat) % n] = 1.0
        elif isinstance(z, Pile):
            out[:] = set_features(g, pile_counts(g, z, value)[0][None], z.max_cards)[0]
        elif isinstance(z, SeatPiles):
            rows = [counts_of(g, card_ids(g, p, z.joined)) for p in value or [[]] * n]
            w = g.card_width
            for r in range(n):
                out[r * w : (r + 1) * w] = card_columns(g, rows[(seat + r) % n])
        elif isinstance(z, SeatNumbers):
            for r in range(n):
                out[r] = (value[(seat + r) % n] - z.low) / max(z.high - z.low, 1e-9)
        elif isinstance(z, Numbers):
            out[:] = (np.array(value, np.float64) - z.low) / max(z.high - z.low, 1e-9)
        elif isinstance(z, Number):
            out[0] = (value - z.low) / max(z.high - z.low, 1e-9)
        elif isinstance(z, Choice):
            out[z.options.index(value)] = 1.0
        elif isinstance(z, History):
            newest = list(reversed((value or [])[-z.last :] if z.last else []))
            width = g.move_size + len(z.then)  # each move, then what was in force (one-hot)
            for i, (who, text, *then) in enumerate(newest):
                kind, counts, _ = read_move(g, text)
                o = i * width
                out[o + (who - seat) % n] = 1.0
                out[o + n + kind] = 1.0
                w = g.card_width
                out[o + n + len(g.kinds) : o + n + len(g.kinds) + w] = card_columns(g, counts)
                if (choice := read_choice(g, text)) >= 0:
                    out[o + n + len(g.kinds) + w + choice] = 1.0
                if z.then:
                    out[o + g.move_size + z.then.index(then[0])] = 1.0
            if z.recency:  # per seat its own moves, newest first: the first of each is its latest
                o, faced = z.last * width, max(1, len(z.then))
                for r in range(n):
                    mine = [e for e in value or [] if e[0] == (seat + r) % n]
                    for ago, (_, text, *then) in enumerate(reversed(mine)):
                        at = z.then.index(then[0]) if z.then else 0
                        j = o + (r * len(g.kinds) + read_move(g, text)[0]) * faced + at
                        out[j] = out[j] or 1.0 / (1 + ago)
        parts.append(out)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def to_answer(g: CardGame, state: dict[str, Any]) -> tuple[np.ndarray, list[int]]:
    z = next(z for z in g.zones if z.field == g.answers)
    value = zone_value(g, z, state)
    if not isinstance(z, History):
        return pile_counts(g, z, value)
    for _, text, *_ in reversed((value or [])[1 - g.players :]):
        _, counts, ids = read_move(g, text)
        if ids:
            return counts, np.repeat(np.arange(g.deck.size), counts).tolist()
    return np.zeros(g.deck.size, np.int64), []


def answer(g: CardGame, counts: np.ndarray, state: dict[str, Any]) -> np.ndarray:
    out = np.zeros((len(counts), ANSWER_SIZE), np.float32)
    if g.answers is None:
        return out
    pile, order = to_answer(g, state)
    _, rank, _, by_suit = g.deck.tables()
    has = counts > 0
    mine_top = np.where(has, rank[None], -1).max(1)
    if not order:
        out[:, 0] = 1.0
        return out
    first, last = order[0], order[-1]
    top = int(rank[pile > 0].max())
    if by_suit.shape[1]:
        lead = by_suit[first] > 0
        if lead.any():
            in_lead = by_suit[:, lead][:, 0] > 0
            out[:, 1] = (has & in_lead[None]).any(1)
            lead_top = int(np.where((pile > 0) & in_lead, rank, -1).max())
            out[:, 5] = np.where(has & in_lead[None], rank[None], -1).max(1) > lead_top
        if (by_suit[last] > 0).any():
            out[:, 2] = (has & (by_suit[:, by_suit[last] > 0][:, 0] > 0)[None]).any(1)
    out[:, 3] = (has & (rank == rank[last])[None]).any(1)
    out[:, 4] = mine_top > top
    out[:, 6] = np.where(mine_top >= 0, (mine_top - top) / g.deck.num_ranks, 0.0)
    out[:, 7] = counts.sum(1) == pile.sum()
    return out


def candidates(g: CardGame, state: dict[str, Any]) -> np.ndarray:
    """float32[K, candidate_size]: kind | cards | what is left in the hand, and whether that
    is nothing | how the move answers | its choice | what it keeps; each a float16's value."""
    hand_zone = next((z for z in g.zones if type(z) is Hand), None)
    hand = (
        pile_counts(g, hand_zone, zone_value(g, hand_zone, state))[0]
        if hand_zone is not None
        else np.zeros(g.deck.size, np.int64)
    )
    hand_max = hand_zone.max_cards if hand_zone is not None else 1
    moves = [read_move(g, text) for text in state[g.legal_field]]
    counts = np.stack([c for _, c, _ in moves])
    kinds = np.zeros((len(moves), len(g.kinds)), np.float32)
    kinds[np.arange(len(moves)), [k for k, _, _ in moves]] = 1.0
    taken = np.array([g.kinds[k].from_hand for k, _, _ in moves])[:, None]
    left = hand[None] - np.where(taken, counts, 0)
    empties = ((left.sum(1) == 0) & (hand.sum() > 0))[:, None].astype(np.float32)
    named = [read_choice(g, text) for text in state[g.legal_field]]
    chosen = np.zeros((len(moves), len(g.choices)), np.float32)
    for m, choice in enumerate(named):
        if choice >= 0:
            chosen[m, choice] = 1.0
    out = np.concatenate(
        [
            kinds,
            set_features(g, counts, hand_max),
            set_features(g, left, hand_max),
            empties,
            answer(g, counts, state),
            chosen,
            kept(g, counts, left, named),
        ],
        axis=1,
    )
    return out.astype(np.float16).astype(np.float32)  # each to the nearest float16, as served


def kept(g: CardGame, counts: np.ndarray, left: np.ndarray, named: list[int]) -> np.ndarray:
    """Per move: its suits, one-hot (its cards', or the deck's suit its choice names), then
    the mean count left in the hand of its own suits and of its own ranks, each as n / (n + 2)."""
    _, rank, _, by_suit = g.deck.tables()
    suits = len(g.deck.suits)
    out = np.zeros((len(counts), suits + 2), np.float32)
    for m, (move, after) in enumerate(zip(counts, left, strict=True)):
        held = np.flatnonzero(move)
        its_suits = sorted({int(np.argmax(by_suit[i])) for i in held if by_suit[i].any()})
        choice = g.choices[named[m]] if named[m] >= 0 else None
        if choice in tuple(g.deck.suits):  # a suit's name, not a part of one
            its_suits = [tuple(g.deck.suits).index(choice)]
        its_ranks = sorted({int(rank[i]) for i in held})
        out[m, its_suits] = 1.0
        left_of_suit = [
            sum(int(after[i]) for i in range(g.deck.size) if by_suit[i, x]) for x in its_suits
        ]
        left_of_rank = [
            sum(int(after[i]) for i in range(g.deck.size) if rank[i] == r) for r in its_ranks
        ]
        for col, lefts in ((suits, left_of_suit), (suits + 1, left_of_rank)):
            n = sum(lefts) / max(len(lefts), 1)
            out[m, col] = n / (n + 2.0)
    return out


def mask_slots(g: CardGame, state: dict[str, Any]) -> set[int]:
    """The fixed head's slots of the state's legal moves."""
    _, _, by_rank, _ = g.deck.tables()
    offsets = np.cumsum([0] + [k.slots(g.deck) for k in g.kinds])
    slots = set()
    for text in state[g.legal_field]:
        kind_i, counts, ids = read_move(g, text)
        kind, offset = g.kinds[kind_i], int(offsets[kind_i])
        head = kind.head_kind
        named = read_choice(g, text)
        per = max(len(kind.choices), 1)  # a slot per choice of each of the kind's own
        choice = kind.choices.index(g.choices[named]) if named >= 0 else 0
        # a card's (a rank's) place among the kind's own (`Kind.ranks`: UNO's skip is a
        # skip card)
        own_cards, own_ranks = kind.rank_cards(g.deck), kind.rank_ids(g.deck)
        if head == "card":
            slots.add(offset + own_cards.index(ids[0] if ids else own_cards[0]) * per + choice)
        elif head in ("rank", "rank-count") and ids:
            rank = own_ranks.index(int(np.argmax(counts @ by_rank)))
            if head == "rank":
                slots.add(offset + rank * per + choice)
            else:
                lo, hi = kind.cards
                slots.add(offset + (rank * (hi - lo + 1) + int(counts.sum()) - lo) * per + choice)
        else:
            slots.add(offset + choice)
    return slots

"""The card-game toolkit: declare a card game, get its adapter.

A studio describes its game as data (`CardGame`): the deck (`Deck`: ranks, suits, jokers,
copies, per card if they differ), the zones a state holds (`Hand`, `Pile`, `TopCard`,
`SeatPiles`, `SeatNumbers`, `Number`, `Choice`, `Seat`, `RoleSeat`, `History`: the own hand,
the discard top or pile, melds, the cards each seat played, counts per seat, the seat a role
names, the recent moves) and its moves, each a set of cards with a kind (`Kind`: "play 7H",
"pair 7H 7S", "fold"). An engine that keeps its own JSON keeps it: zones take its field names,
card sets may be one string (`joined`: "33345"), and a `Spelling` reads its moves into a kind
and cards (`games/doudizhu_cards.py`: RLCard's doudizhu state, unchanged). From that croupier
builds, with nothing engineered by hand:

- the state features: each zone in declaration order (`CardGame.obs_size`); a set of cards as
  counts per card, per rank and per suit, and its size; per-seat zones read from the acting
  seat round the table; the last `History.last` moves newest first (seat, kind, cards);
- two action heads from the one declaration: a fixed head (`CardGameAdapter`: one slot per
  cardless kind, per card or per main rank of a card kind, `Kind.head`; a slot stands for the
  first legal move listed in it) and scored candidates (`CardCandidatesAdapter`: what
  doudizhu's move context does, in general form: each legal move's kind, its cards, what it
  leaves in the hand, and how it answers the zone named `answers`: the trick, the move to
  beat, the top of the discard);
- the legal-move checks: every legal move is spelled `"<kind>[ <card>...]"` with a known kind
  and as many cards as the kind takes, listed once, made of cards in the hand (a `from_hand`
  kind); the zones together hold no more of a card than the deck (`counted` zones);
- worlds for search: the cards the acting seat cannot see dealt at random, each other seat's
  hand with its count (`CardGame.deal_unseen`, where `CardGame.unseen` says where they lie:
  `worlds.py`);
- the JSON Schema of the state (`state_schema`), of an action and of a payoff (from
  `payoff_range`): what the server's OpenAPI document publishes, as strict as JSON Schema can
  say, never stricter than the checks (`tests/test_cards.py` holds both ways).

What depends on a move alone (its kind, its cards' features, what it needs to answer a pile,
its head slot) is computed once, when the move is first read (`CardGame.move`: its row), and a
card set's features once per set (kept by its text: hands and piles repeat from state to
state); a state's encode gathers them, one array operation for all its legal moves. Both
caches are bounded, oldest out first (`MOVES_KEPT`, `SETS_KEPT`); the features are those of
the plain per-zone reading, bit for bit (`tests/test_cards_encode.py`).

What JSON Schema cannot say stays a 422: a legal move's cards in the hand, the deck's copies
across the counted zones and within one move.

A game through the toolkit is `examples/limit_holdem/`, `examples/crazy_eights/`,
`examples/president/`, `croupier.games.doudizhu_cards`, `croupier.games.uno_cards` (docs/
your-game.md is its tutorial, docs/card-toolkit.md its reference).

The package, in import order: `deck.py` (the deck, kinds of moves), `state.py` (a state as
read: card sets, the parsed whole), `zones.py` (each zone's checks, features and schema side
by side, against what a zone reads of its game: `GameView`), `worlds.py` (where unseen cards
lie, dealing them, against what dealing reads: `Dealer`), `game.py` (`CardGame`: the state's
checks, features, head, candidates, schema), `adapters.py` (the two adapters). Each imports
only those before it.
"""

from croupier.games.cards.adapters import CardCandidatesAdapter, CardGameAdapter
from croupier.games.cards.deck import Deck, Kind, Move, Spelling
from croupier.games.cards.game import ANSWER_SIZE, CardGame
from croupier.games.cards.state import CardSet, Parsed
from croupier.games.cards.worlds import Unseen, World
from croupier.games.cards.zones import (
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
    Zone,
)

__all__ = [
    "ANSWER_SIZE",
    "CardCandidatesAdapter",
    "CardGame",
    "CardGameAdapter",
    "CardSet",
    "Choice",
    "Deck",
    "Hand",
    "History",
    "Kind",
    "Move",
    "Number",
    "Numbers",
    "Parsed",
    "Pile",
    "RoleSeat",
    "Seat",
    "SeatNumbers",
    "SeatPiles",
    "Spelling",
    "TopCard",
    "Unseen",
    "World",
    "Zone",
]

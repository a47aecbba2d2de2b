"""What kind of table a recorded seat played at, from its game's seat plan.

Each recorded episode carries it (the record's `table`, `trajectories/record.py`), so the
learner can tell which hands mean what: the rules anchor judges the policy against the rules'
own record, which says something only where the policy met the rules (`trainer/rules_anchor.py`
`Release`). Against a best response the same policy loses ~1.07 a hand in leduc: judged there,
a policy +0.78 above the rules read far below its clone, and the anchor held it at its largest
pull for good (exploitability 1.141 -> 1.087 in 5 minutes where it had reached 0.194).

The kind is named by the seat's opponents (its partners count only when they are not the
learner itself: a learned partner is the policy playing, a rules partner is what the rules'
record was made with):
- `rules`: every opponent plays the game's rules (a shadow or a canary's rules arm too);
- `league`: a fixed version (`frozen@N`, `production`, a tier, a league seat's past version);
- `self-play`: the learning policy itself (`learned`, `learned@latest`, `:greedy`);
- any other seat kind by its own name (`best-response`, `random`, and one added later);
- `mixed`: opponents of more than one of the kinds above besides the rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from croupier.policies.seats import SeatPolicy

RULES_TABLE = "rules"
MIXED_TABLE = "mixed"
# Seat kinds whose table is named otherwise than the kind itself.
_TABLE_OF_KIND = {"frozen": "league", "learned": "self-play"}


def table_kind(
    plan: Mapping[str, SeatPolicy], seat: str, teams: Sequence[Sequence[str]] | None = None
) -> str:
    """The kind of table `seat` plays at in a game seated by `plan`, partners by `teams`."""
    partners = next((set(team) for team in teams or () if seat in team), {seat})
    kinds = {
        _TABLE_OF_KIND.get(policy.kind, policy.kind)
        for other, policy in plan.items()
        if other != seat and not (other in partners and policy.kind == "learned")
    } - {RULES_TABLE}
    if not kinds:
        return RULES_TABLE
    return kinds.pop() if len(kinds) == 1 else MIXED_TABLE

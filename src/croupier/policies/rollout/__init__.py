"""Safe rollout of learned versions: the production channel and its canary share
(`channels`), canary, shadow and league seats and rules recording (`core`), their outcomes
(`outcomes`), the league's pool (`league`) and the live arena's match table from every ended
game (`live`). Seat specs share one grammar with the plain
seats (`policies.seats`)."""

from croupier.policies.rollout.channels import ChannelError, Channels
from croupier.policies.rollout.core import OfflineEpisodes, Rollout, ShadowForward
from croupier.policies.rollout.league import LeagueSampling

__all__ = [
    "ChannelError",
    "Channels",
    "LeagueSampling",
    "OfflineEpisodes",
    "Rollout",
    "ShadowForward",
]

"""The reference engine: a game's simulator tables (RLCard's for the built-in games) that play
hands through the croupier API."""

"""The reference engine: RLCard tables that play hands through the croupier API."""

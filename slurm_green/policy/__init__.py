"""Policies: pure functions from (snapshot, carbon forecast, models, now) to a plan."""

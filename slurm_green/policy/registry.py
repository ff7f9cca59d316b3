"""Policies by name, as the controller's configuration selects them."""

from __future__ import annotations

from slurm_green.controller.config import PolicySettings
from slurm_green.core.plan import Policy
from slurm_green.policy.window import WindowPolicy


def make_policy(settings: PolicySettings) -> Policy:
    if settings.name == "window":
        return WindowPolicy(cap_fraction=settings.cap_fraction, default_runtime_s=settings.default_runtime_h * 3600)
    raise ValueError(f"policy {settings.name!r} is not available in the controller yet")

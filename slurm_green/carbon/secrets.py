"""Provider credentials, wrapped so they never reach a log, an exception or a repr.

Each credential is looked up in this order: the config mapping (key
``electricitymaps_token``, ``watttime_username``, ``watttime_password``), the
environment (``ELECTRICITYMAPS_TOKEN``, ``WATTTIME_USERNAME``,
``WATTTIME_PASSWORD``), then a file named by the ``*_FILE`` variant of that
variable (Docker/Kubernetes secrets; surrounding whitespace is stripped).
Values are pydantic ``SecretStr``: ``str()``/``repr()`` print ``**********``
and only ``get_secret_value()`` at the point of use reveals them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from slurm_green.carbon.errors import AuthError

_ENV_NAMES = {
    "electricitymaps_token": "ELECTRICITYMAPS_TOKEN",
    "watttime_username": "WATTTIME_USERNAME",
    "watttime_password": "WATTTIME_PASSWORD",
}


class CarbonSecrets(BaseModel):
    """Credentials for the live carbon APIs (all optional; a source that needs one says so)."""

    model_config = ConfigDict(frozen=True)

    electricitymaps_token: SecretStr | None = None
    watttime_username: SecretStr | None = None
    watttime_password: SecretStr | None = None

    @classmethod
    def load(cls, config: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> CarbonSecrets:
        """Collect credentials from config, then environment, then ``*_FILE`` files."""
        config = config or {}
        env = os.environ if env is None else env
        found: dict[str, SecretStr] = {}
        for key, var in _ENV_NAMES.items():
            value = config.get(key) or env.get(var) or _read_secret_file(env.get(f"{var}_FILE"), var)
            if value:
                found[key] = SecretStr(value)
        return cls(**found)

    def require(self, key: str, purpose: str) -> SecretStr:
        """The credential ``key``, or :class:`AuthError` saying which variable to set."""
        value = getattr(self, key)
        if value is None:
            var = _ENV_NAMES[key]
            raise AuthError(f"{purpose} needs {var} (or {var}_FILE, or {key} in config)")
        return value


def _read_secret_file(path: str | None, var: str) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AuthError(f"cannot read {var}_FILE {path}: {exc.strerror}") from None

"""Provider credentials, wrapped so they never reach a log, an exception or a repr.

Each credential is looked up in this order: a mapping the caller passes (library
use, keys ``electricitymaps_token``, ``watttime_username``, ``watttime_password``;
the controller's config has no credential keys and passes none), the
environment (``ELECTRICITYMAPS_TOKEN``, ``WATTTIME_USERNAME``,
``WATTTIME_PASSWORD``), then a file named by the ``*_FILE`` variant of that
variable (Docker/Kubernetes secrets). Surrounding whitespace is stripped wherever
the value comes from, as it always was for a file.
Values are pydantic ``SecretStr``: ``str()``/``repr()`` print ``**********``
and only ``get_secret_value()`` at the point of use reveals them.

A missing or unreadable credential is not an error when secrets are loaded, only
when a source needs it (:meth:`CarbonSecrets.require`, called at the source's
first request): the controller must start, carbon-agnostic or on the next source,
while a token file is missing, and say why that source fails.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from slurm_green.carbon.errors import AuthError
from slurm_green.core.regular_file import open_regular

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
    #: Credentials whose ``*_FILE`` could not be read: key -> why (no secret in it).
    unreadable: dict[str, str] = Field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, config: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> CarbonSecrets:
        """Collect credentials from config, then environment, then ``*_FILE`` files; never raises."""
        config = config or {}
        env = os.environ if env is None else env
        found: dict[str, SecretStr] = {}
        unreadable: dict[str, str] = {}
        for key, var in _ENV_NAMES.items():
            # Stripped like a file's: a secret exported from a file often keeps its newline.
            value = (config.get(key) or env.get(var) or "").strip()
            path = env.get(f"{var}_FILE")
            if not value and path:
                try:
                    value = _read_secret_file(path)
                except (OSError, UnicodeDecodeError) as exc:
                    unreadable[key] = f"cannot read {var}_FILE {_shown(path)}: {getattr(exc, 'strerror', None) or exc}"
            if value:
                found[key] = SecretStr(value)
        return cls(**found, unreadable=unreadable)

    def require(self, key: str, purpose: str) -> SecretStr:
        """The credential ``key``, or :class:`AuthError` saying which variable to set (or why its file failed)."""
        value = getattr(self, key)
        if value is not None:
            return value
        if key in self.unreadable:
            raise AuthError(f"{purpose}: {self.unreadable[key]}")
        var = _ENV_NAMES[key]
        raise AuthError(f"{purpose} needs {var} or {var}_FILE in the environment of the process "
                        "(for the service: Environment= or EnvironmentFile= in its systemd unit)")

    def masked(self, text: str) -> str:
        """``text`` with the token and the password held here replaced by ``***``.

        Carbon errors are built without credentials (see :mod:`slurm_green.carbon.errors`), but
        the message of an unexpected exception is whatever a library put in it (a URL, a value it
        refused), and the CLI prints it: this is the last look before it does. The username is
        left as is: it names an account, and masking it would mangle paths and words holding it.
        """
        values = [secret.get_secret_value() for secret in (self.electricitymaps_token, self.watttime_password) if secret]
        for value in sorted(values, key=len, reverse=True):
            if len(value) >= 4:  # as http's masking: a shorter one would mangle every message
                text = text.replace(value, "***")
        return text

    def deferred(self, key: str, purpose: str) -> Credential:
        """The credential, asked for only when a request needs it (see the module docstring)."""
        return lambda: self.require(key, purpose)


#: More than any token or password: a larger "secret file" is the wrong file, and is not read into memory.
_SECRET_FILE_LIMIT = 64 * 1024


def _read_secret_file(path: str) -> str:
    """The stripped text of a secret file; only a regular file is read (a FIFO would block the
    controller's start until a writer came, ``/dev/zero`` would be read for ever), and at most
    :data:`_SECRET_FILE_LIMIT` bytes of it."""
    with open_regular(path) as handle:
        data = handle.read(_SECRET_FILE_LIMIT + 1)
    if len(data) > _SECRET_FILE_LIMIT:
        raise OSError(errno.EFBIG, f"larger than {_SECRET_FILE_LIMIT // 1024} KiB, not a credential")
    return data.decode("utf-8").strip()


def _shown(path: str) -> str:
    """The path of a ``*_FILE`` variable as an error may show it. Secret files are named by absolute
    paths (``/run/secrets/...``); anything else may be the secret itself, set in the ``_FILE``
    variable instead of its own, and an error must not carry it into logs and tick notes."""
    return path if path.startswith("/") else "(not an absolute path, not shown: is it the credential itself?)"


#: A credential as a source holds it: the value, or a function that gives it (or raises AuthError) when needed.
Credential = Callable[[], SecretStr]


def reveal(credential: SecretStr | Credential) -> str:
    """The secret text, at the point of use only."""
    return (credential if isinstance(credential, SecretStr) else credential()).get_secret_value()

"""CURVE keys from files (pyzmq ``zmq.auth`` certificate files) for broker, collectors, mapper.

Key files are the ZeroMQ certificate format written by :func:`zmq.auth.create_certificates`:
``<name>.key`` (public) and ``<name>.key_secret`` (public + secret). The broker authorises the
public keys found in one directory (:class:`zmq.auth.thread.ThreadAuthenticator`); a client
that does not present one of them is refused during the handshake.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth

from lustre_alloc.common.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CurveClient:
    """Keys of a CURVE client (collector or subscriber): its own certificate and the broker's
    public key file."""
    secret_key_file: str
    server_public_key_file: str

    def apply(self, socket: zmq.Socket) -> None:
        """Make ``socket`` a CURVE client (call before ``connect``)."""
        public, secret = _load(self.secret_key_file, secret=True)
        server_public, _ = _load(self.server_public_key_file, secret=False)
        socket.curve_publickey = public
        socket.curve_secretkey = secret
        socket.curve_serverkey = server_public

    def check(self) -> None:
        """Raise :class:`ConfigError` when the files are not usable."""
        _load(self.secret_key_file, secret=True)
        _load(self.server_public_key_file, secret=False)


@dataclass(frozen=True, slots=True)
class CurveServer:
    """Keys of the CURVE server (broker): its certificate and the authorised clients' public
    keys directory."""
    secret_key_file: str
    authorized_keys_dir: str

    def apply(self, socket: zmq.Socket) -> None:
        """Make ``socket`` a CURVE server (call before ``bind``)."""
        public, secret = _load(self.secret_key_file, secret=True)
        socket.curve_publickey = public
        socket.curve_secretkey = secret
        socket.curve_server = True

    def check(self) -> None:
        """Raise :class:`ConfigError` when the files are not usable."""
        _load(self.secret_key_file, secret=True)
        if not os.path.isdir(expand(self.authorized_keys_dir)):
            raise ConfigError(f"authorized keys dir {self.authorized_keys_dir} is not a directory")


def expand(path: str) -> str:
    """``path`` with ``$VARS`` expanded: the packaged configuration names the secret keys as
    ``${CREDENTIALS_DIRECTORY}/<name>.key_secret`` (systemd ``LoadCredential=``).

    Raises:
        ConfigError: a variable in the path is not set.
    """
    out = os.path.expandvars(path)
    if "$" in out:
        raise ConfigError(f"key file path {path!r}: environment variable not set (run under the "
                          f"systemd unit, whose LoadCredential= sets CREDENTIALS_DIRECTORY)")
    return out


def _load(path: str, *, secret: bool) -> tuple[bytes, bytes | None]:
    path = expand(path)
    try:
        public, secret_key = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load CURVE key file {path}: {exc}") from exc
    if secret and not secret_key:
        raise ConfigError(f"{path} holds no secret key (use the .key_secret file)")
    return public, secret_key


def generate_keys(directory: str | os.PathLike[str], name: str) -> tuple[Path, Path]:
    """Write ``<name>.key`` and ``<name>.key_secret`` in ``directory``; returns both paths."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    public, secret = zmq.auth.create_certificates(str(directory), name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)

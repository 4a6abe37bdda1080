"""The mapper's side of the steering agents: where each action goes, and the request/reply
client.

A ``degraded`` action goes to the agent of the OSS serving the OST (the snapshot's
``OstState.oss``, the collector's host name); a ``drain`` goes to every MDS agent (each
drains its own OSP devices: one per MDT). Requests are msgpack maps over a REQ socket
(:mod:`lustre_alloc.collectors.steer_agent` documents them); a reply not back within ``timeout_s`` is an
error, and the socket is replaced (a REQ socket that lost its reply cannot send again).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import msgpack
import zmq

from lustre_alloc.common.curve import CurveClient, expand
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.settings import setting
from lustre_alloc.mapper.steer.controller import SteerParams


@dataclass(frozen=True)
class SteerConfig:
    """The mapper's ``[steer]`` table: the controller's keys (:class:`SteerParams`) and
    where the agents are.

    Attributes:
        params: the controller's settings (:class:`SteerParams`).

    The other keys' unit, default and source are their
    :func:`~lustre_alloc.common.settings.setting` metadata.
    """
    params: SteerParams = field(default_factory=SteerParams)
    interval_s: float = setting(5.0, unit="s", doc="seconds between evaluations",
                                source="the collectors' interval")
    oss_agents: Mapping[str, str] = setting(factory=dict, unit="host -> endpoint", doc=(
        "`[steer.oss_agents]`: OSS host name (as its collector publishes it) -> its steering "
        "agent; needed by `action = \"degraded\"`"), shown="none")
    mds_agents: Mapping[str, str] = setting(factory=dict, unit="name -> endpoint", doc=(
        "`[steer.mds_agents]`: MDS name -> its steering agent; needed by "
        "`action = \"drain\"`"), shown="none")
    agent_keys_dir: str = setting("", unit="directory", doc=(
        "the agents' public keys `<name>.key` (the collectors' own: the broker's "
        "authorised-keys directory serves); with it, requests go over CURVE under the "
        "mapper's `curve_secret_key`"), shown="none")
    agent_timeout_s: float = setting(2.0, unit="s", development=True, doc=(
        "wait this long for an agent's reply, then count an error and replace the socket "
        "(tests shorten it)"), source="an agent's `lctl set_param` takes milliseconds")

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> "SteerConfig":
        """From the ``[steer]`` TOML table.

        Raises:
            ConfigError: one line naming ``steer.<key>``.
        """
        if not isinstance(table, Mapping):
            raise ConfigError("steer must be a table")
        own = {f.name for f in fields(cls)} - {"params"}
        mine = {k: v for k, v in table.items() if k in own}
        try:
            params = SteerParams.from_table({k: v for k, v in table.items() if k not in own})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"steer: {exc}") from None
        for key in ("oss_agents", "mds_agents"):
            agents = mine.get(key, {})
            if not isinstance(agents, Mapping) or not all(
                    isinstance(v, str) and v.startswith(("tcp://", "ipc://", "inproc://"))
                    for v in agents.values()):
                raise ConfigError(f"steer.{key} must map names to ZeroMQ endpoints")
        for key in ("interval_s", "agent_timeout_s"):
            v = mine.get(key, 1.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"steer.{key} must be a number > 0")
        if not isinstance(mine.get("agent_keys_dir", ""), str):
            raise ConfigError("steer.agent_keys_dir must be a path")
        out = cls(params=params, **mine)
        if params.mode == "on" and params.action == "drain" and not out.mds_agents:
            raise ConfigError("steer.mode = on with action = drain needs steer.mds_agents")
        if params.mode == "on" and params.action == "degraded" and not out.oss_agents:
            raise ConfigError("steer.mode = on with action = degraded needs steer.oss_agents")
        return out

    def agent_key(self, name: str) -> str:
        """The public key file of agent ``name`` (``<agent_keys_dir>/<name>.key``)."""
        return os.path.join(expand(self.agent_keys_dir), f"{name}.key")


class AgentError(RuntimeError):
    """An agent did not answer in time, or answered ``ok = False`` (the message says which)."""


class AgentClient:
    """Requests to one agent.

    Args:
        name: the agent's name (OSS host or MDS name), for messages.
        endpoint: its ZeroMQ endpoint.
        curve: CURVE client keys (the mapper's secret key, the agent's public key), or None.
        timeout_s: reply timeout.
        context: ZeroMQ context.
    """

    def __init__(self, name: str, endpoint: str, curve: CurveClient | None, timeout_s: float,
                 context: zmq.Context):
        self.name, self.endpoint, self.curve = name, endpoint, curve
        self.timeout_ms = int(timeout_s * 1000)
        self.context = context
        self.socket: zmq.Socket | None = None

    def _open(self) -> zmq.Socket:
        s = self.context.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        if self.curve is not None:
            self.curve.apply(s)
        s.connect(self.endpoint)
        return s

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request``; the agent's reply.

        Raises:
            AgentError: no reply within the timeout, an undecodable reply, or ``ok`` false.
        """
        if self.socket is None:
            self.socket = self._open()
        self.socket.send(msgpack.packb(request, use_bin_type=True))
        if not self.socket.poll(self.timeout_ms, zmq.POLLIN):
            self.close()
            raise AgentError(f"agent {self.name} ({self.endpoint}): no reply within "
                             f"{self.timeout_ms} ms")
        try:
            reply = msgpack.unpackb(self.socket.recv(), raw=False)
        except (ValueError, msgpack.UnpackException) as exc:
            raise AgentError(f"agent {self.name}: undecodable reply: {exc}") from None
        if not isinstance(reply, dict) or not reply.get("ok"):
            error = reply.get("error") if isinstance(reply, dict) else reply
            raise AgentError(f"agent {self.name}: {error}")
        return reply

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close(0)
            self.socket = None


class AgentDirectory:
    """Which agents an action on an OST goes to.

    Args:
        config: the ``[steer]`` settings.
        secret_key: the mapper's CURVE secret key file (required with ``agent_keys_dir``).
        context: ZeroMQ context.
    Raises:
        ConfigError: ``agent_keys_dir`` without a secret key.
    """

    def __init__(self, config: SteerConfig, secret_key: str, context: zmq.Context):
        if config.agent_keys_dir and not secret_key:
            raise ConfigError("steer.agent_keys_dir needs mapper.curve_secret_key (the "
                              "mapper's own key pair)")
        self.clients: dict[str, AgentClient] = {}
        self._oss = dict(config.oss_agents)
        self._mds = list(config.mds_agents)
        for name, endpoint in {**config.oss_agents, **config.mds_agents}.items():
            curve = CurveClient(secret_key, config.agent_key(name)) if config.agent_keys_dir \
                else None
            if curve is not None:
                curve.check()
            self.clients[name] = AgentClient(name, endpoint, curve, config.agent_timeout_s,
                                             context)

    def for_action(self, kind: str, oss: str) -> list[AgentClient]:
        """The agents that apply ``kind`` on an OST served by ``oss``.

        Raises:
            AgentError: a ``degraded`` action on an OSS with no configured agent.
        """
        if kind == "drain":
            return [self.clients[n] for n in self._mds]
        if oss not in self._oss:
            raise AgentError(f"no steer.oss_agents entry for OSS {oss!r}")
        return [self.clients[oss]]

    def close(self) -> None:
        for c in self.clients.values():
            c.close()

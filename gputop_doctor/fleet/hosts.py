"""``--hosts a:19400,https://b:19400,ssh://user@c``: which machines to watch and how to reach
them, optionally grouped by the job they run (``--hosts train=a:19400,b:19400,eval=c:19400``:
an entry ``NAME=HOST`` starts job NAME, and the entries after it belong to it until the next
``NAME=``); ``--hosts-ca FILE``: the certificate authority an https exporter's certificate is
checked against (the system's when not given)."""

from __future__ import annotations

import os
import re
import ssl
import stat
from dataclasses import dataclass, replace
from enum import Enum

from gputop_doctor.config.network import DEFAULT_PORT
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.text import printable

_HOSTNAME = re.compile(r"^[A-Za-z0-9._-]+$|^\[[0-9A-Fa-f:.]+\]$")
_USER = re.compile(r"^[A-Za-z0-9._-]+$")
_JOB = re.compile(r"^([A-Za-z0-9._-]+)=(.*)$")


class Transport(Enum):
    HTTP = "http"  # the exporter's /api/v1/frame
    SSH = "ssh"  # `serve --stdout-json` run over ssh; no port opened on the remote


@dataclass(frozen=True, slots=True)
class HostSpec:
    transport: Transport
    host: str
    port: int | None = None  # None for ssh: ssh's own default or config
    user: str | None = None
    tls: bool = False  # https://: the exporter runs serve --tls-cert
    job: str | None = None  # the --hosts group it was listed in: the job it runs

    @property
    def url(self) -> str:
        """The exporter's frame view (HTTP transport)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}/api/v1/frame"

    @property
    def label(self) -> str:
        """How the host is named on screen: what the user typed, minus the scheme."""
        if self.transport is Transport.SSH:
            who = f"{self.user}@" if self.user else ""
            return f"{who}{self.host}" + (f":{self.port}" if self.port else "")
        return f"{self.host}:{self.port}"


class HostsError(UsageError):
    """A ``--hosts`` list we cannot use; the message is one line."""


def _port(text: str, spec: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise HostsError(f"--hosts: bad port in {spec!r}")
    return int(text)


def _split_host_port(text: str, spec: str) -> tuple[str, str]:
    if text.startswith("["):
        host, _, rest = text.partition("]")
        return host + "]", rest.removeprefix(":")
    host, _, port = text.partition(":")
    return host, port


def parse_host(spec: str) -> HostSpec:
    """One entry; raises HostsError with a one-line message."""
    text = spec.strip()
    if text.startswith("ssh://"):
        rest = text.removeprefix("ssh://")
        user, at, hostport = rest.rpartition("@")
        if at and not _USER.match(user):
            raise HostsError(f"--hosts: bad user in {spec!r}")
        host, port = _split_host_port(hostport, spec)
        if not _HOSTNAME.match(host):
            raise HostsError(f"--hosts: bad host in {spec!r}")
        return HostSpec(Transport.SSH, host, _port(port, spec) if port else None, user or None)
    scheme, sep, rest = text.partition("://")
    if sep and scheme not in ("http", "https"):
        raise HostsError(
            f"--hosts: use HOST:PORT, https://HOST:PORT or ssh://user@host, got {spec!r}"
        )
    host, port = _split_host_port(rest.removesuffix("/") if sep else text, spec)
    if not host or not _HOSTNAME.match(host):
        raise HostsError(f"--hosts: bad host in {spec!r}")
    port_number = _port(port, spec) if port else DEFAULT_PORT
    return HostSpec(Transport.HTTP, host, port_number, tls=scheme == "https")


def parse_hosts(text: str) -> tuple[HostSpec, ...]:
    specs = []
    job: str | None = None
    for part in (p.strip() for p in text.split(",")):
        named = _JOB.match(part)
        if named:
            job, part = named.group(1), named.group(2).strip()
        if part:
            specs.append(replace(parse_host(part), job=job))
        elif named:
            raise HostsError(f"--hosts: job {job!r} names no host")
    if not specs:
        raise HostsError("--hosts: no hosts given")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise HostsError("--hosts: a host is listed twice")
    return tuple(specs)


MAX_CA_BYTES = 16 * 1024 * 1024


def tls_context(ca_file: str | None) -> ssl.SSLContext | None:
    """The TLS settings for https:// hosts: ``ca_file``'s certificates as the only trusted
    authorities, host names checked; None (the system's authorities) without one. A file
    that cannot be used is a one-line HostsError, before anything is polled."""
    if ca_file is None:
        return None
    try:
        info = os.stat(ca_file)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the load for ever
            raise OSError("not a regular file")
        if info.st_size > MAX_CA_BYTES:
            raise OSError("larger than 16 MiB")
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise HostsError(
            f"--hosts-ca: cannot use {printable(ca_file, 200)}: {printable(reason, 160)}"
        ) from None

"""Pod names and namespaces from the kubelet's pod-resources socket, when it is mounted.

A process's cgroup path names its pod by UID only; the name and namespace live in the kubelet.
The kubelet's pod-resources API (``k8s.io/kubelet/pkg/apis/podresources/v1``, gRPC service
``v1.PodResourcesLister`` on ``/var/lib/kubelet/pod-resources/kubelet.sock``, the socket
dcgm-exporter reads too) lists each pod's name, namespace and containers with the devices the
device plugin assigned them: for ``nvidia.com/gpu`` the GPUs' UUIDs. It carries no pod UID, so
the link is the GPU: a process on GPU ``GPU-8f2c...`` belongs to the pod the kubelet assigned
that GPU to (core.jobs.with_pod_names).

Optional (``pip install 'gputop-doctor[k8s]'``: grpcio). The few fields needed are decoded by
hand from protobuf's wire format (a varint key, then a varint or a length-prefixed payload),
which is shorter and clearer than generated code for the whole API; fields not listed here
(CPU IDs, memory, topology, dynamic resources) are skipped by their wire type.

Asked at most every ``ttl_s`` with a short deadline; a kubelet that does not answer leaves the
UIDs as they are, as on a node without the socket.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping

from gputop_doctor.core.job_identity import PodRef

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
TTL_S = 30.0
DEADLINE_S = 2.0
MAX_ANSWER = 16 << 20

# Field numbers of the messages read (api.proto of podresources/v1).
RESPONSE_POD_RESOURCES = 1  # ListPodResourcesResponse.pod_resources
POD_NAME, POD_NAMESPACE, POD_CONTAINERS = 1, 2, 3  # PodResources
CONTAINER_NAME, CONTAINER_DEVICES = 1, 2  # ContainerResources
DEVICE_IDS = 2  # ContainerDevices (1 is resource_name: the IDs say which GPU already)

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that are not a protobuf message of the expected shape."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise WireError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, payload bytes or varint) of each field of one message, in order."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == VARINT:
            value, at = _varint(data, at)
            yield number, value
        elif kind == LENGTH:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise WireError("truncated field")
            yield number, data[at : at + size]
            at += size
        elif kind in (FIXED64, FIXED32):
            at += 8 if kind == FIXED64 else 4
        else:
            raise WireError(f"wire type {kind}")
    if at != len(data):
        raise WireError("truncated fixed field")


def _strings(data: bytes, *numbers: int) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {n: [] for n in numbers}
    for number, value in fields(data):
        if number in found and isinstance(value, bytes):
            found[number].append(value.decode("utf-8", "replace"))
    return found


def _messages(data: bytes, number: int) -> list[bytes]:
    return [v for n, v in fields(data) if n == number and isinstance(v, bytes)]


def decode_list(data: bytes) -> dict[str, PodRef]:
    """Device ID -> the pod (and container) it is assigned to, from a ListPodResourcesResponse."""
    devices: dict[str, PodRef] = {}
    for pod in _messages(data, RESPONSE_POD_RESOURCES):
        names = _strings(pod, POD_NAME, POD_NAMESPACE)
        name, namespace = "".join(names[POD_NAME]), "".join(names[POD_NAMESPACE])
        for container in _messages(pod, POD_CONTAINERS):
            container_name = "".join(_strings(container, CONTAINER_NAME)[CONTAINER_NAME])
            for assigned in _messages(container, CONTAINER_DEVICES):
                for device in _strings(assigned, DEVICE_IDS)[DEVICE_IDS]:
                    devices[device] = PodRef(name, namespace, container_name)
    return devices


class PodResources:
    """The kubelet's device assignments, re-asked every ``ttl_s``."""

    def __init__(
        self,
        socket_path: str = SOCKET,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import grpc  # type: ignore[import-untyped]

        self.socket_path = socket_path
        self.ttl_s = ttl_s
        self._clock = clock
        self._channel = grpc.insecure_channel(f"unix://{socket_path}")
        self._list = self._channel.unary_unary(
            LIST_METHOD,
            request_serializer=lambda _: b"",  # ListPodResourcesRequest has no fields
            response_deserializer=decode_list,
        )
        self._rpc_error = grpc.RpcError
        self._devices: dict[str, PodRef] = {}
        self._due = 0.0

    def devices(self) -> Mapping[str, PodRef]:
        """Device ID -> pod; the last answer while the kubelet does not answer."""
        now = self._clock()
        if now >= self._due:
            self._due = now + self.ttl_s
            # Not answered: keep what we had (the UIDs stay, nothing is made up).
            with contextlib.suppress(self._rpc_error, WireError):
                self._devices = self._list(None, timeout=DEADLINE_S)
        return self._devices

    def close(self) -> None:
        self._channel.close()


def open_pod_resources(socket_path: str = SOCKET) -> PodResources | None:
    """The kubelet's pod-resources client, or None without the socket or the ``k8s`` extra."""
    if not os.path.exists(socket_path):
        return None
    try:
        return PodResources(socket_path)
    except ImportError:
        return None

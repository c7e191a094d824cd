"""The kubelet's pod-resources API, served by a real gRPC server on a unix socket in the test:
the real service and method (``v1.PodResourcesLister/List``) and messages encoded by the real
protobuf library from the field numbers of ``k8s.io/kubelet/pkg/apis/podresources/v1``'s
api.proto (with the fields the monitor skips: CPU IDs, topology). The monitor's own decoder
reads them; GPU processes of the pod then carry its name and namespace. And without the
socket: no client, the UIDs as before."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputop_doctor.core.job_identity import PodRef
from gputop_doctor.core.jobs import with_pod_names
from gputop_doctor.core.model import GpuProcess, GpuSample, JobIdentity
from gputop_doctor.sources.pod_resources import WireError, decode_list, open_pod_resources
from tests.builders import proc

grpc = pytest.importorskip("grpc")
UID = "74c13223-5a00-11e9-b385-42010a80018d"
GPU_UUID = "GPU-8f2c0e5a-1b2c-3d4e-5f60-718293a4b5c6"


def _messages() -> dict[str, Any]:
    """The api.proto messages the List call uses, built from their descriptors."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    string, int64, message = f.TYPE_STRING, f.TYPE_INT64, f.TYPE_MESSAGE
    one, many = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    shapes = {
        "ListPodResourcesRequest": [],
        "ListPodResourcesResponse": [("pod_resources", 1, message, many, "PodResources")],
        "PodResources": [
            ("name", 1, string, one, None),
            ("namespace", 2, string, one, None),
            ("containers", 3, message, many, "ContainerResources"),
        ],
        "ContainerResources": [
            ("name", 1, string, one, None),
            ("devices", 2, message, many, "ContainerDevices"),
            ("cpu_ids", 3, int64, many, None),
        ],
        "ContainerDevices": [
            ("resource_name", 1, string, one, None),
            ("device_ids", 2, string, many, None),
            ("topology", 3, message, one, "TopologyInfo"),
        ],
        "TopologyInfo": [("nodes", 1, message, many, "NUMANode")],
        "NUMANode": [("ID", 1, int64, one, None)],
    }
    proto = descriptor_pb2.FileDescriptorProto(name="api.proto", package="v1", syntax="proto3")
    for name, fields in shapes.items():
        msg = proto.message_type.add(name=name)
        for field, number, kind, label, of in fields:
            entry = msg.field.add(name=field, number=number, type=kind, label=label)
            if of:
                entry.type_name = f".v1.{of}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{n}")) for n in shapes
    }


def _answer(m: dict[str, Any]) -> Any:
    """Two pods: one with a GPU (and CPUs pinned, a NUMA node), one with none."""
    gpu = m["ContainerDevices"](
        resource_name="nvidia.com/gpu",
        device_ids=[GPU_UUID],
        topology=m["TopologyInfo"](nodes=[m["NUMANode"](ID=1)]),
    )
    train = m["PodResources"](
        name="train-0",
        namespace="research",
        containers=[m["ContainerResources"](name="trainer", devices=[gpu], cpu_ids=[4, 5, 300])],
    )
    web = m["PodResources"](name="web", namespace="default", containers=[])
    return m["ListPodResourcesResponse"](pod_resources=[train, web])


@pytest.fixture(scope="module")
def kubelet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gRPC server answering ``v1.PodResourcesLister/List`` on a unix socket: its path."""
    m = _messages()
    socket = tmp_path_factory.mktemp("kubelet") / "kubelet.sock"
    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(
                lambda request, context: _answer(m),
                request_deserializer=m["ListPodResourcesRequest"].FromString,
                response_serializer=m["ListPodResourcesResponse"].SerializeToString,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    try:
        yield str(socket)
    finally:
        server.stop(grace=None).wait()


def test_the_kubelet_names_the_pod_of_a_gpu_process(kubelet: str) -> None:
    client = open_pod_resources(kubelet)
    assert client is not None
    try:
        devices = client.devices()
    finally:
        client.close()
    assert devices == {GPU_UUID: PodRef("train-0", "research", "trainer")}
    in_pod = JobIdentity(pod_uid=UID, container="ab" * 32)
    gpus = (GpuSample(index=0, uuid=GPU_UUID, processes=(GpuProcess(10, 0),)),)
    named = with_pod_names((proc(10, job=in_pod), proc(11, job=in_pod), proc(12)), gpus, devices)
    jobs = [p.job for p in named]
    assert jobs[0] == jobs[1] == replace(in_pod, pod_name="train-0", namespace="research")
    assert jobs[0] is not None and jobs[0].label == "pod train-0"
    assert jobs[2] is None  # a process of no pod is left alone


def test_without_the_socket_the_uid_stays(tmp_path: Path) -> None:
    assert open_pod_resources(str(tmp_path / "kubelet.sock")) is None


@pytest.mark.parametrize("data", [b"\x0a\x05ab", b"\x0a", b"\x0f", b"\x0d\x00"])
def test_bytes_that_are_no_message_are_refused(data: bytes) -> None:
    with pytest.raises(WireError):
        decode_list(data)

"""The REST routes of the gateway's gRPC services, from their
``google.api.http`` annotations: GatewayService (protos/graphmesh/gateway)
and google.longrunning.Operations (googleapis' operations.proto: GET
/v1/{name=operations/**}, GET /v1/{name=operations}, POST
/v1/{name=operations/**}:cancel, DELETE /v1/{name=operations/**})."""
from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.api import annotations_pb2
from google.longrunning import operations_pb2_grpc, operations_proto_pb2
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

#: The services served over REST, in route order.
SERVICES = (gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"],
            operations_proto_pb2.DESCRIPTOR.services_by_name["Operations"])


@dataclass(frozen=True)
class Route:
    """One annotated method: HTTP verb, path template, the method, whether
    the route takes a body (else the query parameters fill the request)."""

    verb: str
    path: str
    method: MethodDescriptor
    has_body: bool

    @property
    def rpc(self) -> str:
        """The method's name, e.g. "Search" or "GetOperation"."""
        return self.method.name


def routes() -> list[Route]:
    """Every annotated method of SERVICES (WaitOperation has no route)."""
    out = []
    for service in SERVICES:
        for method in service.methods:
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            verb = rule.WhichOneof("pattern")
            if verb and verb != "custom":
                out.append(Route(verb.upper(), getattr(rule, verb), method, bool(rule.body)))
    return out


def request_class(method: MethodDescriptor) -> type[Message]:
    """The generated message class of ``method``'s request."""
    return message_factory.GetMessageClass(method.input_type)


def stubs(channel: grpc.aio.Channel) -> dict[str, object]:
    """A stub per service over ``channel``, by the service's full name."""
    return {SERVICES[0].full_name: gateway_pb2_grpc.GatewayServiceStub(channel),
            SERVICES[1].full_name: operations_pb2_grpc.OperationsStub(channel)}

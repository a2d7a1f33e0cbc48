"""The transport-neutral status of a call: gRPC's codes (Connect uses the same set).

Its own module, below both sides: the service ends failed calls with these codes
(`pyruntime.service.status` maps core errors to them) and the client raises one error per code.
"""

from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    """The status codes of gRPC and Connect, with gRPC's numbers and names."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

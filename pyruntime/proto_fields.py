"""A dataclass as its `coreai.v1` twin and back, field by field by name. Pure.

The contract's messages and the runtime's dataclasses (a cut report, a memory state, a transcript row, a turn's
usage) are twins: the same fields under the same names. Copying them by name here, rather than spelling each
field at every conversion, keeps one rule, and a field that one twin lacks fails loudly: protobuf refuses an
unknown keyword, and reading a field a message lacks raises AttributeError. What differs (a nested message, an
optional that is "" on the wire) is passed as an override.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf.message import Message

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

MessageT = TypeVar("MessageT", bound=Message)
DataclassT = TypeVar("DataclassT", bound="DataclassInstance")


def to_message(value: DataclassInstance, message_type: type[MessageT], **overrides: Any) -> MessageT:
    """The message of `message_type` holding each field of `value` by name; `overrides` replace fields."""
    values = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    return message_type(**{**values, **overrides})


def from_message(message: Message, cls: type[DataclassT], **overrides: Any) -> DataclassT:
    """The dataclass `cls` holding each of its init fields read from `message` by name; `overrides` replace fields."""
    names = (field.name for field in dataclasses.fields(cls) if field.init and field.name not in overrides)
    return cls(**{name: getattr(message, name) for name in names}, **overrides)

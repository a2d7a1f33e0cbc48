"""Reach the Unity package's `internal` C# from pytest.

pythonnet imports only public types (`from CoreAI.Runtime import ProtoJson` fails once ProtoJson is internal), and
InternalsVisibleTo does not help it: the check is pythonnet's own, not the runtime's. What does work: an *instance* of
an internal type is an ordinary Python object whose public members pythonnet calls as usual. So this module finds the
type by reflection and gives tests a small stand-in for the class:

    ProtoJson = internal("CoreAI.Runtime.ProtoJson")
    text = ProtoJson.Serialize(message)                   # static methods, properties, fields and constants
    back = ProtoJson.Deserialize[ChatMessage](text)       # generic methods (type arguments: classes or System.Types)
    envelope = internal("CoreAI.Runtime.ConnectEnvelope")(2, payload)   # constructors
    orchestrator = member(client, "Orchestrator")         # an internal member of a public object

Exceptions thrown by the C# arrive unwrapped (not as TargetInvocationException), as with a public call. The C# test
assemblies need none of this: InternalsVisibleTo in the package names them (docs/unity.md#public-api).
"""

from __future__ import annotations

from typing import Any

# The package's plain-C# assemblies, searched in this order when no assembly is named.
ASSEMBLIES = ("CoreAI.Client", "CoreAI.Hosting")


def _reflection() -> Any:
    from System.Reflection import BindingFlags

    return BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static | BindingFlags.Instance


def clr_type(full_name: str, assembly: str | None = None) -> Any:
    """The System.Type of a (possibly internal) type of a loaded assembly (default: Client, then Hosting); raises
    LookupError when it is not there."""
    from System import Type

    for name in (assembly,) if assembly else ASSEMBLIES:
        found = Type.GetType(f"{full_name}, {name}")
        if found is not None:
            return found
    raise LookupError(f"no type {full_name} in {assembly or ASSEMBLIES} (is the assembly loaded?)")


def _as_type(t: Any) -> Any:
    import clr
    from System import Type

    return t if isinstance(t, Type) else clr.GetClrType(t)


def _arguments(args: tuple[Any, ...], parameters: Any) -> Any:
    """An object[] for MethodBase.Invoke: each value converted to its parameter type by pythonnet, boxed in .NET.

    A Python int put straight into an object[] stays a Python object (Invoke cannot convert it), so each value goes into
    a one-element array of the parameter's type first and Array.Copy boxes it; a missing optional one is Type.Missing.
    """
    from System import Array, Byte, Object, Type

    values = Array.CreateInstance(Object, len(parameters))
    for i, p in enumerate(parameters):
        if i >= len(args):
            values[i] = Type.Missing
            continue
        t = p.ParameterType.GetElementType() if p.ParameterType.IsByRef else p.ParameterType
        typed = Array.CreateInstance(t, 1)
        if args[i] is not None:
            typed[0] = Array[Byte](list(args[i])) if isinstance(args[i], (bytes, bytearray)) else args[i]
        Array.Copy(typed, 0, values, i, 1)
    return values


def _fits(parameters: Any, args: tuple[Any, ...]) -> bool:
    if len(args) > len(parameters):
        return False
    if any(not p.IsOptional for p in list(parameters)[len(args):]):
        return False
    for value, p in zip(args, parameters, strict=False):
        t = p.ParameterType
        if value is None:
            if t.IsValueType and t.Name != "Nullable`1":
                return False
        elif isinstance(value, str) and t.FullName not in ("System.String", "System.Object"):
            return False
        elif isinstance(value, (bytes, bytearray)) and not t.IsArray:
            return False
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not (t.IsPrimitive or t.IsEnum):
            return False
        elif hasattr(value, "GetType") and not (t.IsByRef or t.IsInstanceOfType(value)):
            return False  # a .NET object: only a parameter that can hold it
    return True


def _invoke(candidates: list[Any], target: Any, args: tuple[Any, ...], what: str) -> Any:
    from System.Reflection import BindingFlags, ConstructorInfo, TargetInvocationException

    for method in candidates:
        parameters = method.GetParameters()
        if not _fits(parameters, args):
            continue
        values = _arguments(args, parameters)
        try:
            if isinstance(method, ConstructorInfo):
                return method.Invoke(BindingFlags.OptionalParamBinding, None, values, None)
            return method.Invoke(target, BindingFlags.OptionalParamBinding, None, values, None)
        except TargetInvocationException as e:
            raise e.InnerException from None
    raise TypeError(f"no overload of {what} takes {len(args)} argument(s) like these")


class _Method:
    """A static (or instance) method group; `[T, ...]` picks the generic instantiation."""

    def __init__(self, owner: Any, name: str, target: Any = None, type_args: tuple[Any, ...] = ()) -> None:
        self._owner, self._name, self._target, self._type_args = owner, name, target, type_args

    def __getitem__(self, types: Any) -> _Method:
        args = types if isinstance(types, tuple) else (types,)
        return _Method(self._owner, self._name, self._target, tuple(_as_type(t) for t in args))

    def __call__(self, *args: Any) -> Any:
        from System import Array, Type

        candidates = []
        for m in self._owner.GetMethods(_reflection()):
            if m.Name != self._name or m.IsStatic != (self._target is None):
                continue
            if self._type_args:
                if not m.IsGenericMethodDefinition or len(m.GetGenericArguments()) != len(self._type_args):
                    continue
                m = m.MakeGenericMethod(Array[Type](list(self._type_args)))
            elif m.IsGenericMethodDefinition:
                continue
            candidates.append(m)
        return _invoke(candidates, self._target, args, f"{self._owner.FullName}.{self._name}")


class InternalType:
    """Stand-in for an internal class: call it to construct, read static members off it."""

    def __init__(self, t: Any) -> None:
        self.clr = t

    def __call__(self, *args: Any) -> Any:
        return _invoke(list(self.clr.GetConstructors(_reflection())), None, args, f"new {self.clr.FullName}")

    def __getattr__(self, name: str) -> Any:
        from System import Enum

        if self.clr.IsEnum:
            return Enum.Parse(self.clr, name)
        prop = self.clr.GetProperty(name, _reflection())
        if prop is not None and prop.GetGetMethod(True).IsStatic:
            return prop.GetValue(None, None)
        field = self.clr.GetField(name, _reflection())
        if field is not None and field.IsStatic:
            return field.GetValue(None)
        if any(m.Name == name for m in self.clr.GetMethods(_reflection())):
            return _Method(self.clr, name)
        raise AttributeError(f"{self.clr.FullName} has no static member {name}")


def internal(full_name: str, assembly: str | None = None) -> InternalType:
    """The internal type `full_name` of `assembly` (default: Client, then Hosting), a Python stand-in for its class."""
    return InternalType(clr_type(full_name, assembly))


def member(obj: Any, name: str) -> Any:
    """An instance member of obj by name, whatever its visibility: a property's or field's value, or a bound method."""
    t = obj.GetType()
    prop = t.GetProperty(name, _reflection())
    if prop is not None:
        return prop.GetValue(obj, None)
    field = t.GetField(name, _reflection())
    if field is not None:
        return field.GetValue(obj)
    if any(m.Name == name for m in t.GetMethods(_reflection())):
        return _Method(t, name, target=obj)
    raise AttributeError(f"{t.FullName} has no member {name}")

"""A command's settings from three places, one precedence: flags > `COREAI_*` environment > `--config` JSON > defaults.

The keys are derived from the flags themselves, so there is one option table, not three: `--grpc-port` is
`COREAI_GRPC_PORT` in the environment and `"grpc_port"` in the config file. `install(parser)` (after the
flags are added) adds `--config FILE` (also `COREAI_CONFIG`) and takes the parser's defaults over;
`resolve(args)` fills in every option the command line did not give. A bad value is an
InvalidArgumentError naming the variable or key (never its value: it may be a path with a user name).
Relative paths in a config file are relative to the file's folder, so a config next to a bundled
runtime can name `models/x.gguf`. Options of one mutually exclusive group come from one layer only.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyruntime.errors import InvalidArgumentError

ENV_PREFIX = "COREAI_"
CONFIG_DEST = "config"
CONFIG_ENV = f"{ENV_PREFIX}CONFIG"
_TABLE = "_layered_options"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class LayeredOption:
    """One option as every layer names it."""

    dest: str
    flag: str
    default: Any
    is_switch: bool  # store_true: no value on the command line
    kind: Any  # the flag's type (int, float, Path, …); None for a plain string
    choices: tuple[Any, ...] | None
    group: int | None  # index of its mutually exclusive group

    @property
    def env(self) -> str:
        """`COREAI_<DEST>`."""
        return ENV_PREFIX + self.dest.upper()


def install(parser: argparse.ArgumentParser) -> None:
    """Add `--config` and take over the defaults of the parser's options (call after adding them)."""
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help=f"JSON file of settings (keys: the flags' names with underscores, e.g. \"grpc_port\"); "
                             f"also ${CONFIG_ENV}. Precedence: flags > {ENV_PREFIX}<NAME> environment > file > "
                             "defaults")
    # argparse has no public API for its actions and groups; these attributes have been stable since Python 3.2.
    groups = {id(action): index for index, group in enumerate(parser._mutually_exclusive_groups)
              for action in group._group_actions}
    table = []
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", CONFIG_DEST) or action.default is argparse.SUPPRESS:
            continue
        is_switch = isinstance(action, argparse._StoreTrueAction)
        table.append(LayeredOption(action.dest, action.option_strings[-1], action.default, is_switch, action.type,
                                   tuple(action.choices) if action.choices else None, groups.get(id(action))))
        action.default = argparse.SUPPRESS  # absent from the parsed args unless given: the lower layers decide
    parser.set_defaults(**{_TABLE: tuple(table)})


def options_of(args: argparse.Namespace) -> tuple[LayeredOption, ...]:
    """The layered options of args' command (empty when its parser did not install layers)."""
    return getattr(args, _TABLE, ())


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """Fill in every option the command line did not give, from the environment, the config file, the defaults."""
    table = options_of(args)
    if not table:
        return args
    environ = os.environ if environ is None else environ
    given = {o.dest: getattr(args, o.dest) for o in table if hasattr(args, o.dest)}
    from_env = {o.dest: _from_env(o, environ[o.env]) for o in table if environ.get(o.env, "").strip()}
    config = getattr(args, CONFIG_DEST, None) or (Path(environ[CONFIG_ENV]) if environ.get(CONFIG_ENV) else None)
    from_file = _from_file(Path(config), table) if config is not None else {}
    layers = [given, from_env, from_file]
    _one_layer_per_group(table, layers)
    for option in table:
        value = next((layer[option.dest] for layer in layers if option.dest in layer), option.default)
        setattr(args, option.dest, value)
    return args


def _one_layer_per_group(table: tuple[LayeredOption, ...], layers: list[dict[str, Any]]) -> None:
    """The highest layer that sets a member of an exclusive group sets the whole group; others are dropped."""
    groups = {o.group for o in table if o.group is not None}
    names = ("the command line", "the environment", "the config file")
    for group in groups:
        members = [o for o in table if o.group == group]
        owner = None
        for index, layer in enumerate(layers):
            chosen = [o for o in members if o.dest in layer and (layer[o.dest] or not o.is_switch)]
            if len(chosen) > 1 and index > 0:
                keys = " and ".join(o.env if index == 1 else repr(o.dest) for o in chosen)
                raise InvalidArgumentError(f"{keys} cannot be used together (in {names[index]})")
            if chosen and owner is None:
                owner = index
        for index, layer in enumerate(layers):
            if owner is not None and index != owner:
                for option in members:
                    layer.pop(option.dest, None)


def _from_env(option: LayeredOption, raw: str) -> Any:
    text = raw.strip()
    if option.is_switch:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InvalidArgumentError(f"{option.env} must be 1/true/yes/on or 0/false/no/off")
    return _checked(option, _convert(option, text, option.env), option.env)


def _convert(option: LayeredOption, text: str, name: str) -> Any:
    if option.kind is None:
        return text
    try:
        return option.kind(text)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} must be {_kind_name(option)}") from None


def _checked(option: LayeredOption, value: Any, name: str) -> Any:
    if option.choices is not None and value not in option.choices:
        raise InvalidArgumentError(f"{name} must be one of {', '.join(map(str, option.choices))}")
    return value


def _kind_name(option: LayeredOption) -> str:
    return {int: "an integer", float: "a number"}.get(option.kind, "a path" if option.kind is Path else "text")


def _from_file(path: Path, table: tuple[LayeredOption, ...]) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError("--config: no such file") from None
    except (OSError, UnicodeDecodeError):
        raise InvalidArgumentError("--config: the file cannot be read") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"--config: not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InvalidArgumentError("--config: the file must hold one JSON object of settings")
    by_key = {o.dest: o for o in table}
    values: dict[str, Any] = {}
    for key, value in data.items():
        option = by_key.get(key)
        if option is None:
            raise InvalidArgumentError(f"config file key {key!r} is not a setting (known: {', '.join(sorted(by_key))})")
        values[key] = _from_json(option, value, path.parent)
    return values


def _from_json(option: LayeredOption, value: Any, folder: Path) -> Any:
    name = f"config file key {option.dest!r}"
    if option.is_switch:
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be true or false")
        return value
    if value is None:
        return option.default
    if option.kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"{name} must be an integer")
    elif option.kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"{name} must be a number")
        value = float(value)
    elif not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be {_kind_name(option)}")
    elif option.kind is Path:
        value = folder / Path(value).expanduser()  # an absolute value stays as it is
    elif option.kind is not None:
        value = _convert(option, value, name)
    return _checked(option, value, name)

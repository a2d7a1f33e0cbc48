"""`serve` settings without flags: COREAI_* variables and a --config JSON file, one precedence (flags > env > file >
defaults), keys derived from the flags, bad values refused naming the key."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pyruntime.cli import build_parser, layers
from pyruntime.cli.serve import options_from_args
from pyruntime.errors import InvalidArgumentError
from tests.model.test_serve_cli import Serve


def _options(argv: list[str], env: dict[str, str] | None = None):
    args = build_parser().parse_args(["serve", *argv])
    return options_from_args(layers.resolve(args, env or {}))


def _config(tmp_path: Path, **values) -> Path:
    path = tmp_path / "coreai-runtime.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return path


def test_every_serve_flag_has_an_environment_variable_and_a_config_key() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve"])
    table = {o.dest: o for o in layers.options_of(args)}
    serve = next(a.choices["serve"] for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {a.dest for a in serve._actions if a.option_strings and a.dest not in ("help", "config")}
    assert set(table) == flags  # one table: nothing left out, nothing parsed twice
    assert table["grpc_port"].env == "COREAI_GRPC_PORT" and table["session_only"].env == "COREAI_SESSION_ONLY"


def test_precedence_is_flags_then_environment_then_file_then_defaults(tmp_path: Path) -> None:
    config = _config(tmp_path, grpc_port=1001, connect_port=1002, grace=3, session_only=True)
    env = {"COREAI_CONNECT_PORT": "2002", "COREAI_GRACE": "4.5"}
    options = _options(["--config", str(config), "--grace", "7"], env)
    assert options.grpc_port == 1001  # file
    assert options.connect_port == 2002  # environment over file
    assert options.grace == 7.0  # flag over both
    assert options.session_only is True
    assert options.chat_history_cap == _options(["--session-only"]).chat_history_cap  # default
    defaults = _options([])
    assert (defaults.grpc_port, defaults.connect_port, defaults.session_only) == (13334, 13335, False)


def test_the_config_file_may_come_from_the_environment_and_paths_are_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    config = _config(tmp_path, model="models/npc.gguf", data_dir="/srv/saves", tls_cert="certs/server.pem")
    options = _options([], {"COREAI_CONFIG": str(config)})
    assert options.model == tmp_path / "models" / "npc.gguf"
    assert options.data_dir == Path("/srv/saves")
    assert options.tls_cert == tmp_path / "certs" / "server.pem"
    assert _options(["--data-dir", "here"], {"COREAI_CONFIG": str(config)}).data_dir == Path("here")


def test_switches_from_the_environment() -> None:
    assert _options([], {"COREAI_SESSION_ONLY": "yes", "COREAI_NO_MODEL": "1"}).no_model is True
    assert _options([], {"COREAI_SESSION_ONLY": "off"}).session_only is False
    assert _options([], {"COREAI_SESSION_ONLY": ""}).session_only is False  # empty: unset
    with pytest.raises(InvalidArgumentError, match="COREAI_SESSION_ONLY must be 1/true/yes/on"):
        _options([], {"COREAI_SESSION_ONLY": "maybe"})


def test_prewarm_is_the_model_profile_s_unless_set() -> None:
    assert _options([]).prewarm is None  # the factory decides: on for a hosted model, off for --llm-url
    assert _options(["--llm-url", "http://127.0.0.1:1/v1", "--prewarm", "on"]).prewarm is True
    assert _options([], {"COREAI_PREWARM": "off"}).prewarm is False
    with pytest.raises(SystemExit):
        _options(["--prewarm", "maybe"])


def test_one_layer_sets_the_model_source(tmp_path: Path) -> None:
    config = _config(tmp_path, llm_url="http://127.0.0.1:1234/v1")
    options = _options(["--no-model", "--config", str(config)], {"COREAI_MODEL": "x.gguf"})
    assert (options.no_model, options.model, options.llm_url) == (True, None, None)  # the command line's choice
    options = _options(["--config", str(config)], {"COREAI_MODEL": "x.gguf"})
    assert (options.model, options.llm_url) == (Path("x.gguf"), None)  # the environment's, not a mix
    with pytest.raises(InvalidArgumentError, match="COREAI_MODEL and COREAI_NO_MODEL cannot be used together"):
        _options([], {"COREAI_MODEL": "x.gguf", "COREAI_NO_MODEL": "1"})
    both = _config(tmp_path, model="a.gguf", llm_url="http://127.0.0.1:1/v1")
    with pytest.raises(InvalidArgumentError, match="'model' and 'llm_url' cannot be used together"):
        _options(["--config", str(both)])
    assert _options(["--config", str(_config(tmp_path, model="a.gguf", no_model=False))]).model == tmp_path / "a.gguf"


@pytest.mark.parametrize(
    ("values", "env", "message"),
    [
        ({}, {"COREAI_GRPC_PORT": "many"}, "COREAI_GRPC_PORT must be an integer"),
        ({}, {"COREAI_LOG_FORMAT": "xml"}, "COREAI_LOG_FORMAT must be one of text, json"),
        ({"grpc_port": "13334"}, {}, "config file key 'grpc_port' must be an integer"),
        ({"grpc_port": True}, {}, "config file key 'grpc_port' must be an integer"),
        ({"session_only": "yes"}, {}, "config file key 'session_only' must be true or false"),
        ({"grace": "5"}, {}, "config file key 'grace' must be a number"),
        ({"tool_mode": "telepathy"}, {}, "config file key 'tool_mode' must be one of"),
        ({"grcp_port": 1}, {}, "config file key 'grcp_port' is not a setting"),
        ({"model": 5}, {}, "config file key 'model' must be a path"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, values, env, message) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        _options(["--config", str(_config(tmp_path, **values))], env)


def test_bad_config_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="--config: no such file"):
        _options(["--config", str(tmp_path / "missing.json")])
    broken = tmp_path / "broken.json"
    broken.write_text('{"grpc_port": 1,\n', encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match=r"--config: not valid JSON \(line 2"):
        _options(["--config", str(broken)])
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match="one JSON object"):
        _options(["--config", str(listed)])


def test_serve_runs_from_environment_and_config_alone(tmp_path: Path) -> None:
    config = _config(tmp_path, no_model=True, grpc_port=0, log_format="json")
    serve = Serve(tmp_path, env={"COREAI_CONFIG": str(config), "COREAI_SESSION_ONLY": "1", "COREAI_CONNECT_PORT": "0"})
    try:
        ready = serve.ready()
        assert ready["grpc_port"] > 0 and ready["connect_port"] > 0 and ready["model_url"] is None
        assert json.loads(serve.err.splitlines()[0])["level"]  # log_format from the file
    finally:
        serve.process.terminate()
        assert serve.wait() == 0


def test_serve_refuses_a_bad_variable_with_exit_2(tmp_path: Path) -> None:
    serve = Serve(tmp_path, "--no-model", "--session-only", env={"COREAI_GRPC_PORT": "many"})
    assert serve.wait() == 2
    assert "COREAI_GRPC_PORT must be an integer" in serve.err
    assert serve.stdout_lines() == []

"""A runtime restarted with a new token: clients that read the token from the launcher carry on by themselves, and a
call refused for the old token is reported as "the runtime restarted", not as Unauthenticated."""

from __future__ import annotations

import os
import signal

import pytest

from tests.unity.conftest import wait
from tests.unity_layer.processes import wait_for


def _restart(launcher) -> str:
    old = launcher.Endpoint.Token
    first = launcher.ProcessId
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: launcher.RestartCount == 1 and launcher.IsHealthy() and launcher.ProcessId != first, 60,
             "the restart")
    assert launcher.Endpoint.Token != old  # a restart gets a new token
    return old


def test_a_client_follows_the_restarted_runtimes_token(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    launcher = RuntimeLauncher(make_options())
    launchers.append(launcher)
    launcher.Start()
    client = launcher.CreateClient(None)  # what the bootstrap and the Memory Inspector hand out
    try:
        assert wait(client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
        _restart(launcher)
        # The same client, no new object: the next call carries the new token.
        assert wait(client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
    finally:
        client.Dispose()


def test_a_call_sent_with_the_old_token_reports_the_restart(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher
    from CoreAI.Runtime import (
        ConnectClientOptions,
        CoreAIRuntimeClient,
        RuntimeRestartedException,
        UnauthenticatedException,
        UnavailableException,
    )
    from System import Func, String

    launcher = RuntimeLauncher(make_options())
    launchers.append(launcher)
    endpoint = launcher.Start()
    old = _restart(launcher)
    reads = []

    def token() -> str:
        # The call is built with the old token (the restart happens while it is on its way), then the source moves on.
        reads.append(1)
        return old if len(reads) == 1 else launcher.Endpoint.Token

    options = ConnectClientOptions()
    options.BaseUrl = endpoint.ConnectBaseUrl
    options.TokenSource = Func[String](token)
    client = CoreAIRuntimeClient(options, None)
    try:
        with pytest.raises(RuntimeRestartedException, match="restarted") as info:
            wait(client.GetRoleConfigAsync("Merchant"))
        assert isinstance(info.value, UnavailableException)  # existing retry code treats it as "try again"
        assert wait(client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
        # A wrong token that is not an old one stays Unauthenticated.
        stale = CoreAIRuntimeClient(endpoint.ConnectBaseUrl, "not-the-token", None)
        with pytest.raises(UnauthenticatedException):
            wait(stale.GetRoleConfigAsync("Merchant"))
        stale.Dispose()
    finally:
        client.Dispose()


def test_two_launchers_of_one_runtime_follow_one_restart(make_options, launchers) -> None:
    from CoreAI.Launcher import RuntimeLauncher

    # Play Mode's bootstrap and the Memory Inspector: two launchers, one runtime.
    options = make_options()
    play = RuntimeLauncher(options)
    launchers.append(play)
    first = play.Start().ProcessId
    inspector = RuntimeLauncher(options)
    launchers.append(inspector)
    assert inspector.Start().ProcessId == first and inspector.Reused
    play_client, inspector_client = play.CreateClient(None), inspector.CreateClient(None)
    try:
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: play.IsHealthy() and inspector.IsHealthy() and play.ProcessId not in (0, first), 60,
                 "both launchers to see the restarted runtime")
        wait_for(lambda: inspector.ProcessId == play.ProcessId, 30, "one runtime for both")
        assert wait(play_client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
        assert wait(inspector_client.GetRoleConfigAsync("Merchant")).RoleId == "Merchant"
        assert play.Endpoint.Token == inspector.Endpoint.Token
    finally:
        play_client.Dispose()
        inspector_client.Dispose()

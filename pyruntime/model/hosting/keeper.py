"""`python -m pyruntime.model.hosting.keeper PARENT_PID -- COMMAND...`: run COMMAND until it exits or PARENT_PID dies.

macOS has no PR_SET_PDEATHSIG: a native model server would outlive a runtime killed with SIGKILL. This
process stands between them (model/hosting/lifeline.py): it watches the runtime, kills the server when the
runtime is gone, forwards SIGTERM/SIGINT to it, and exits with the server's code. Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_S = 0.5


def main(argv: list[str]) -> int:
    """Run the command of `argv` (`PARENT_PID -- COMMAND...`) under the parent's watch."""
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m pyruntime.model.hosting.keeper PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    parent = int(argv[0])
    child = subprocess.Popen(argv[2:])  # same process group: the runtime kills both at once

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        code = child.poll()
        if code is not None:
            return code
        if os.getppid() != parent:
            child.kill()
            child.wait()
            return 1
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

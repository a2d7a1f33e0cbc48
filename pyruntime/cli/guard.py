"""How every saves command ends: one stderr log line and an exit code, never a traceback.

Exit codes: 0 success, 1 the operation failed (an unreachable runtime included), 2 bad input, a missing
or refused runtime token included (nothing was written), 130 stopped by Ctrl+C.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from pyruntime.client import RuntimeCallError, UnauthenticatedError
from pyruntime.errors import CoreAIError, InvalidArgumentError
from pyruntime.net.auth import TOKEN_ENV

log = logging.getLogger("pyruntime.cli.memory")  # the saves commands' logger, whichever module reports

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl+C


class UsageError(InvalidArgumentError):
    """Bad command-line input; reported with exit code 2 before anything is written."""


class RuntimeUnreachableError(CoreAIError):
    """--runtime names a runtime that does not answer (the game is not running, or another port)."""


def _error_name(exc: CoreAIError) -> str:
    """The core error's name, the same whether the core raised it here or a runtime answered with it."""
    for cls in type(exc).__mro__:
        if cls.__module__ == CoreAIError.__module__ and cls is not CoreAIError:
            return cls.__name__
    return exc.code.name if isinstance(exc, RuntimeCallError) else type(exc).__name__


def guarded(handler: Callable[[argparse.Namespace], int], logger: logging.Logger = log,
            ) -> Callable[[argparse.Namespace], int]:
    """Turn every error into one stderr log line (on `logger`: the command's own) and an exit code; never a
    traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except KeyboardInterrupt:
            logger.error("stopped (Ctrl+C)")
            return EXIT_INTERRUPTED
        except UnauthenticatedError:
            logger.error("the runtime refused the token (missing or wrong): give --token-file, set %s, or use "
                      "the token file of the running runtime", TOKEN_ENV)
            return EXIT_USAGE
        except RuntimeUnreachableError as exc:
            logger.error("%s", exc)
            return EXIT_FAILED
        except InvalidArgumentError as exc:
            logger.error("invalid input: %s", exc)
            return EXIT_USAGE
        except CoreAIError as exc:
            # Runtime errors are written to name no key, role or content.
            logger.error("%s: %s", _error_name(exc), exc)
            return EXIT_FAILED
        except OSError as exc:
            # The OS message may carry a path (a key stem); log only what failed.
            logger.error("I/O error (%s, errno %s)", type(exc).__name__, exc.errno)
            return EXIT_FAILED
        except Exception as exc:  # the CLI promises one line, not a traceback
            logger.error("unexpected %s", type(exc).__name__)
            logger.debug("details", exc_info=True)
            return EXIT_FAILED

    run.__name__ = handler.__name__
    return run


"""Set up everything the project needs on this machine, on Linux, macOS or Windows, then optionally run it.

    python3 tools/bootstrap.py            # install what is missing (the README's scripts call this)
    python3 tools/bootstrap.py run ...    # ... then the runtime with its embedded model (scripts/run.sh)
    python3 tools/bootstrap.py test ...   # ... then every test (scripts/test.sh)
    python3 tools/bootstrap.py doctor     # what is present and missing here, with the fix for each
    python3 tools/bootstrap.py --help

The logic lives in tools/coreai_bootstrap/ (plan: the pure decisions per OS; the rest does the I/O).
This file only checks the Python version first, in syntax any Python can parse, so that an old Python gets
a clear message instead of a SyntaxError.
"""

import os
import sys

MIN_PYTHON = (3, 11)

if sys.version_info[:2] < MIN_PYTHON:
    sys.stderr.write(
        "[bootstrap] error: this is Python " + ".".join(str(n) for n in sys.version_info[:2])
        + "; the project needs Python >= " + ".".join(str(n) for n in MIN_PYTHON) + ". Run this file with a newer"
        " one (e.g. python3.11 tools/bootstrap.py; Debian/Ubuntu: apt-get install python3, macOS: brew install"
        " python@3.12, Windows: winget install -e --id Python.Python.3.12)\n")
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: tools.*

from tools.coreai_bootstrap.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

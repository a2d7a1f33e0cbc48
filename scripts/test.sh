#!/usr/bin/env bash
# Installs what is missing, then runs every test (the fast ones and the slow real-model ones).
# Extra arguments go to pytest (e.g. -m "not slow").
exec bash "$(dirname "$0")/bootstrap.sh" test "$@"

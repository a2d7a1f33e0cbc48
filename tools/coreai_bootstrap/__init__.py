"""The bootstrap behind `tools/bootstrap.py` and `scripts/*`: one recipe for every desktop OS.

- `plan`     what to do on a machine, decided from its facts alone (pure: no I/O, tested by simulating OSes)
- `host`     gathers those facts from the real machine
- `llama`    builds (once, into the cache) and verifies the pinned llama.cpp artifacts: the wheel and llama-server
- `progress` the long steps show they are alive
- `main`     the command line: install, run, test, doctor, where
"""

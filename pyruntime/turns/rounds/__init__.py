"""Running a turn's tool rounds against the model (contract §7): the model rounds (loop.py), the loop's rules
(rules.py), how tool calls travel (modes.py), the tools a game registers (registry.py) and the game tools a client
declares with a turn and runs itself (client_tools.py).
"""

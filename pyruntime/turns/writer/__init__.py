"""The memory writer: after a reply, what of the player's line a small model keeps (decision.py, prompt.py), the
pass that asks the model behind player turns (passes.py), and when its edit may land (gate.py).
"""

"""The work between turns: after a reply, the next turn is prepared off the player's path (next_turn.py): its fold
made and staged (folds.py), its prefix evaluated (prewarm.py), and where its memory-last block goes (block_pace.py).
"""

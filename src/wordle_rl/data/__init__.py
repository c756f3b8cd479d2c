"""Training data: the train/val/test splits and the leakage check, JSONL files and their checks,
solver games for SFT, recall games, RL prompt rows and teacher traces. Built on the engine and the
environment."""

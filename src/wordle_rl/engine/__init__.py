"""The engine: the packaged word lists, scoring and feedback patterns, expected-information kernels
and the solver baselines. Pure Python and numpy; it imports nothing else of wordle-rl."""

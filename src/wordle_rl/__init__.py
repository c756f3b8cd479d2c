"""wordle-rl: train language models to play Wordle with reinforcement learning.

Layers point one way: ``words``/``game`` (pure, numpy) <- ``solvers`` <-
``env``/``rewards``/``prompts`` <- ``data`` <- ``train``/``eval`` <- ``cli``.
"""

__version__ = "0.1.0"

"""wordle-rl: train language models to play Wordle with reinforcement learning.

One subpackage per layer, each importing only itself and the layers before it: ``engine`` <-
``environment`` <- ``data`` <- ``models`` <- ``training`` <- ``evaluation`` <- ``pipeline`` <-
``cli``.
"""

__version__ = "0.1.0"

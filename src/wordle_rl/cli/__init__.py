"""The ``wordle-rl`` command line (typer + rich): ``main`` holds the app and the game commands, the
other modules one group of commands each."""

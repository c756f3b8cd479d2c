"""The multi-turn text environment: prompt styles, the strict completion parser, reward components
and TRL reward functions, the in-process environment, the OpenEnv server and its client, and the
guess tool. Built on the engine only."""

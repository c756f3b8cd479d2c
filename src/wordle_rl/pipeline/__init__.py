"""The main job: its configuration and presets, the stages from word lists to evaluation, and the
report."""

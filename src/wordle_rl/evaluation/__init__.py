"""Evaluation: policies playing every answer of a split, constrained decoding, metrics with
confidence intervals, paired statistics, the training-overlap audit, the recall probe, result tables
and plots."""

"""Training: SFT with TRL's ``SFTTrainer`` and soft letter targets, and multi-turn GRPO with TRL's
``GRPOTrainer`` and its rollouts (whole games, single moves, tool calls)."""

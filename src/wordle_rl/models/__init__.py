"""Models: the embedded default (a Qwen3 built from a config with a local character tokenizer), the
loading of any causal LM folder or hub id, and the prompt style a model folder records."""

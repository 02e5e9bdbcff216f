"""From Stage-A JSONL to rows: the split, the selection settings, prompts, photo-aware rows, SFT rows, the dataset.
Pure."""

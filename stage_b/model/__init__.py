"""The verdict model through ms-swift: generation and verdict log-probabilities (generate, the ms-swift adapter), the
engine flags (engine_settings), replies to p_fail and reasons (model_replies)."""

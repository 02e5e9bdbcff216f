"""What people look at: the evaluation and judging cards (cards), the training plot (plot_training, also a command) and
the operating curve (plot_operating)."""

"""The verdict contract every layer shares: the two-line reply and its parse (verdict), what a reason cites and which
photos show a defect (grounding), how rates print (numbers), range checks (bounds). Pure."""

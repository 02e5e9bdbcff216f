"""Training the verdict model: LoRA targets (lora), rewards, the launcher (launch), preflight, the run record."""

"""The trainer side: the only place torch, transformers, peft and bitsandbytes are imported."""

"""Prompts as AUTOMATIC1111 writes them: attention weights, BREAK, LoRA references."""

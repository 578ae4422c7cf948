"""Model files: what a folder or file is (torch-free), where models come from, loading them."""

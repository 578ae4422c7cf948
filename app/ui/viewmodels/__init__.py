"""Qt objects holding what the widgets show; they reach the store only through a Runner."""

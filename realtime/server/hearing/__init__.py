"""What the local server hears: offline speech recognition with a model inside an installed package."""

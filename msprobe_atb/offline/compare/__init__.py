"""`compare`: pairing two dumps' tensors, their metrics, the engines, the torch golden."""

"""`stats` and `overflow`: what a dump holds and where NaN/Inf appear."""

"""`report`: the self-contained HTML page."""

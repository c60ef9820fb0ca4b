"""`msprobe-atb diagnose`: the root cause of what went wrong in a dump, the one
diagnosis stats, compare, the report's headline and incidents all show."""

"""`incidents`: the flight recorder's incident reports, each with the replay of its
first offending op and its process's diagnosis."""

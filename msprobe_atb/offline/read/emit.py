"""A command's result printed, or written to the file its -o names."""

from __future__ import annotations


def emit(text: str, output: str | None, done: str) -> None:
    """Prints `text`, or writes it to `output` and prints `done` with the file's name;
    a file that cannot be written raises ValueError naming it."""
    if not output:
        print(text)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as e:
        raise ValueError(f"-o {output}: cannot be written ({e.strerror})") from None
    print(f"{done}; written to {output}")

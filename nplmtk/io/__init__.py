"""Inputs and outputs: `-` is stdin/stdout, `.gz` is transparent. reading.py reads and
checks every input (UTF-8, the longest line and word, stdin kept once read); writing.py
writes every output (a regular file to a temporary file renamed into place, a FIFO or a
device in place; open_output one at a time, OutputBatch many with one sync). Each name is
imported from its module when first used: a command that writes no file (scoring) does not
load the writers."""
import importlib

_READING = ("BLOCK_BYTES", "GZIP_MAGIC", "MAX_LINE_BYTES", "MAX_TOKEN_BYTES", "READ_BYTES", "begin_command",
            "byte_limit", "check_readable", "check_tokens", "check_words", "comes_once", "decoded_lines",
            "is_stream", "line_starts_near", "line_too_long", "long_line_start", "max_line_bytes", "max_token_bytes",
            "read_bytes", "read_lines", "read_mapped", "read_small_bytes", "read_text", "read_text_blocks",
            "read_text_range", "release_mapped", "token_too_long")
_WRITING = ("OutputBatch", "check_writable", "gzipped", "open_output")
_MODULES = {**{name: ".reading" for name in _READING}, **{name: ".writing" for name in _WRITING}}

__all__ = sorted(_MODULES)


def __getattr__(name):
    if name not in _MODULES:
        raise AttributeError(f"module 'nplmtk.io' has no attribute '{name}'")
    value = getattr(importlib.import_module(_MODULES[name], __name__), name)
    globals()[name] = value  # found directly from now on
    return value

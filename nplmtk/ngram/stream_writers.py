"""The out-of-core model's writers, by the name they had before nplmtk/ngram/stream/ was a
package (tests and scripts import them from here)."""
from .stream.writers import write_arpa_streamed, write_binary_streamed

__all__ = ["write_arpa_streamed", "write_binary_streamed"]

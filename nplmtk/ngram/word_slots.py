"""The vocabulary's UTF-8 bytes laid out for the kernels that write text (ARPA and counts
lines; cython_ext/word_slots.pxd reads them)."""
import numpy as np

SLOT_BYTES = 16  # a word's slot: up to 15 bytes, then its length
LONG_WORD = 255  # a slot's last byte where the word has 16 bytes or more
BLOCK_WORDS = 1 << 16  # the slots filled a block of words at a time: a few MiB of temporaries


class WordSlots:
    """Word w's bytes in a slot of its own (`slots[w]`, its length last) where it has
    fewer than 16, and always at data[start[w]:start[w + 1]]: a writer reads one 16-byte
    slot a word, not two arrays far apart. `longest`: the longest word's bytes."""

    def __init__(self, words):
        encoded = [word.encode("utf-8") for word in words]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        self.start = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.start[1:])
        self.data = np.frombuffer(b"".join(encoded) + b"\0", dtype=np.uint8)  # never empty: a pointer to take
        self.slots = np.zeros((len(encoded), SLOT_BYTES), dtype=np.uint8)
        short = lengths < SLOT_BYTES
        for first in range(0, len(encoded), BLOCK_WORDS):  # each byte's word and place: 16 bytes a byte
            last = min(first + BLOCK_WORDS, len(encoded))
            low, high = int(self.start[first]), int(self.start[last])
            word_of_byte = np.repeat(np.arange(first, last), lengths[first:last])
            place = np.arange(low, high) - self.start[word_of_byte]
            in_slot = short[word_of_byte]
            self.slots[word_of_byte[in_slot], place[in_slot]] = self.data[low:high][in_slot]
        self.slots[:, -1] = np.where(short, lengths, LONG_WORD)
        self.longest = int(lengths.max(initial=0))

    def __len__(self):
        return len(self.slots)

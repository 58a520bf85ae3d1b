# The sorted n-gram keys of nplmtk/ngram/index.py, searched by the ARPA reader and the
# back-off kernel alike (inline: cimported, no module imported at run time).


cdef inline long long find_key(const long long *keys, long long low, long long high, long long key) noexcept nogil:
    """The row of `key` among keys[low:high] (sorted), -1 if it is not there."""
    cdef long long end = high, middle
    while low < high:
        middle = (low + high) >> 1
        if keys[middle] < key:
            low = middle + 1
        else:
            high = middle
    return low if low < end and keys[low] == key else -1

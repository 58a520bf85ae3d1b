"""The exchange of an estimate that holds every row (StreamEstimate's default): what an
estimate of one rank's rows asks of the other ranks (mpi_estimate.RankExchange), found
here among its own rows. Every stage asks its exchange, never which kind it is."""
from .rows import suffix_rows_by_windows


class LocalExchange:

    def model_order(self, store):
        """The model's order: the store's (a rank's part may lack the highest orders)."""
        return store.order

    def share(self, estimate):
        """The estimate's rows (`sizes`, `first_rows`): every row of the store, as they are."""

    def suffix_rows(self, estimate, k):
        """`suffix{k}` (k > 2) and `continuation{k-1}`."""
        suffix_rows_by_windows(estimate, k)

    def word_continuation(self, counted):
        """The unigrams' continuation counts from the bigrams' second words (`counted`)."""
        return counted

    def summed(self, histogram):
        """The counts-of-counts of all the rows from those of the estimate's."""
        return histogram

    def all_words(self, values):
        """Values of every word's unigram row from those of the estimate's."""
        return values

    def kept_before(self, k, kept):
        """How many model rows of order k come before the estimate's `kept` ones."""
        return 0

    def suffix_walks(self, estimate, k):
        """`lower{k}`: the back-off walk (`WALK`) of each order-k row's suffix."""
        estimate.suffix_walks("lower", k, "walk")

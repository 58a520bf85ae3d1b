"""Neural language models: the Bengio et al. (2003) network and its trainer."""

"""The `nplm` command line: one thin module per subcommand over the nplmtk library."""

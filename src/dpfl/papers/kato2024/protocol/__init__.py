"""kato2024 Figs 11-12: the private weighting protocol's phase times. Import-light (nothing here): a plot job depends
on this file (dpfl.codedeps)."""

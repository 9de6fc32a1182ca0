"""kato2024's training figures (Figs 4-10): one panel per cell, its methods computed one after another as runs.
Import-light (nothing here): a plot job depends on this file (dpfl.codedeps)."""

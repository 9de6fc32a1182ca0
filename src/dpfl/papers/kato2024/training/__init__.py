"""kato2024's training figures (Figs 4-10): one method on one panel per cell. Import-light (nothing here): a plot job
depends on this file (dpfl.codedeps)."""

"""kato2024 Fig 2 (analytic): group-privacy ε vs group size. Import-light (nothing here): a plot job depends on this
file (dpfl.codedeps)."""
